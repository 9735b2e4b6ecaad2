"""scripts/provider_facts.py reads the facts the stand-in needs from Go schema literals.

The Go below is written for this test in the shape the provider's schemas take (a
resource function, nested blocks inline and through a function, validators, groups).
"""

from __future__ import annotations

import json
import runpy
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]

GO = """package example

func exampleNested() *schema.Resource {
	return &schema.Resource{
		Schema: map[string]*schema.Schema{
			"size": {
				Type:         schema.TypeInt,
				Optional:     true,
				ForceNew:     true,
				ValidateFunc: validation.IntBetween(1, 10),
			},
		},
	}
}

func ResourceExample() *schema.Resource {
	return &schema.Resource{
		// A comment with a brace { that is not code.
		Schema: map[string]*schema.Schema{
			"name": {
				Type:     schema.TypeString,
				Required: true,
				ForceNew: true,
				Description: `A name, {braces} and "quotes" inside.`,
			},
			"tier": {
				Type:         schema.TypeString,
				Optional:     true,
				ValidateFunc: verify.ValidateEnum([]string{"BASIC", "PREMIUM", ""}),
				Default:      "BASIC",
			},
			"account": {
				Type:         schema.TypeString,
				Optional:     true,
				Computed:     true,
				ValidateFunc: verify.ValidateRFC1035Name(6, 30),
				ConflictsWith: []string{"settings.0.size"},
			},
			"timeout": {
				Type:         schema.TypeString,
				Optional:     true,
				ValidateFunc: verify.ValidateRegexp(`^[0-9]+s$`),
			},
			"regions": {
				Type:     schema.TypeList,
				Optional: true,
				ForceNew: true,
				Elem:     &schema.Schema{Type: schema.TypeString},
			},
			"settings": {
				Type:     schema.TypeList,
				Optional: true,
				MaxItems: 1,
				Elem:     exampleNested(),
			},
			"uid": {
				Type:     schema.TypeString,
				Computed: true,
			},
		},
	}
}
"""


@pytest.fixture
def script() -> dict[str, Any]:
    return runpy.run_path(str(REPO / "scripts" / "provider_facts.py"))


def test_the_facts_of_one_schema(script: dict[str, Any]) -> None:
    source = script["Source"](GO)
    facts = script["_attributes"](source, source.function_schema("ResourceExample"))
    assert facts["name"] == {"type": "string", "required": True, "force_new": True}
    assert facts["tier"] == {
        "type": "string",
        "optional": True,
        "enum": ["BASIC", "PREMIUM", ""],
        "default": "BASIC",
    }
    assert facts["account"]["computed"] and facts["account"]["length"] == [6, 30]
    assert facts["account"]["conflicts_with"] == ["settings.size"]
    assert facts["timeout"]["regexp"] == "^[0-9]+s$"
    assert facts["regions"] == {
        "type": "list",
        "optional": True,
        "force_new": True,
        "element": "string",
    }
    assert facts["settings"]["block"] and facts["settings"]["max_items"] == 1
    assert facts["settings.size"] == {
        "type": "int",
        "optional": True,
        "force_new": True,
        "range": [1, 10],
    }
    assert facts["uid"] == {"type": "string", "computed": True}


def test_a_schema_it_cannot_follow_fails_loudly(script: dict[str, Any]) -> None:
    go = GO.replace('"uid": {', '"uid": sharedSchema(),\n\t\t\t"other": {')
    source = script["Source"](go)
    with pytest.raises(ValueError, match="uid: cannot follow"):
        script["_attributes"](source, source.function_schema("ResourceExample"))


def test_the_recorded_table_is_what_the_script_writes(
    script: dict[str, Any], tmp_path: Path
) -> None:
    # Regenerating needs the provider's source; the table's layout must still be the
    # script's (one attribute per line), so a regeneration diffs line by line.
    table = REPO / "localcloud" / "terraform_provider" / "provider_facts.json"
    recorded = json.loads(table.read_text())
    assert script["_dump"](recorded) == table.read_text()
    assert recorded["version"] == script["TAG"].removeprefix("v")
    assert set(recorded["resources"]) == set(script["RESOURCES"]) | set(script["IAM_MEMBERS"])
