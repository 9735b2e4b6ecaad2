"""The mutmut name patterns of the mutated files changed since a base revision.

    python scripts/mutation_changed.py [BASE]

Prints one pattern a line for `mutmut run` (which takes fnmatch patterns of mutant names):
the mutants of every file that `[tool.mutmut]` in pyproject.toml mutates and that differs
from where the branch left BASE (default main), uncommitted and new files included.
Prints nothing when no such file changed. `make mutation-changed BASE=main` runs it.
"""

from __future__ import annotations

import fnmatch
import subprocess
import sys
import tomllib
from collections.abc import Iterable
from pathlib import Path


def mutated(path: str, only_mutate: Iterable[str], do_not_mutate: Iterable[str] = ()) -> bool:
    """Whether mutmut mutates `path` (its own rule: a .py file matching only_mutate)."""
    if not path.endswith(".py"):
        return False
    if any(fnmatch.fnmatch(path, pattern) for pattern in do_not_mutate):
        return False
    only = list(only_mutate)
    return not only or any(fnmatch.fnmatch(path, pattern) for pattern in only)


def patterns(path: str) -> list[str]:
    """The patterns matching the names of `path`'s mutants, and no other file's.

    mutmut names a mutant `<module>.x_<function>__mutmut_<n>` or, in a class,
    `<module>.xǁ<Class>ǁ<method>__mutmut_<n>`; a package's `__init__` is left out of the
    module name.
    """
    module = path.removesuffix(".py").replace("/", ".").removesuffix(".__init__")
    return [f"{module}.x_*", f"{module}.xǁ*"]


def _git(*args: str) -> list[str]:
    out = subprocess.run(["git", *args], check=True, capture_output=True, text=True).stdout
    return [line for line in out.splitlines() if line]


def changed_files(base: str) -> list[str]:
    """Files that differ from where HEAD left `base`: committed, uncommitted or new."""
    fork = _git("merge-base", base, "HEAD")[0]
    files = set(_git("diff", "--name-only", fork)) | set(
        _git("ls-files", "--others", "--exclude-standard")
    )
    return sorted(f for f in files if Path(f).is_file())


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    base = args[0] if args else "main"
    config = tomllib.loads(Path("pyproject.toml").read_text())["tool"]["mutmut"]
    only, skip = config.get("only_mutate", []), config.get("do_not_mutate", [])
    for path in changed_files(base):
        if mutated(path, only, skip):
            print("\n".join(patterns(path)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
