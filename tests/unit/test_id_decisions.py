"""The ids pinned as literals: a change to how they are derived shows here.

Each literal was picked to end in "x": base32's alphabet holds the letter, so an id is
never trimmed of anything but padding (20 bytes of base32 have none).
"""

from __future__ import annotations

from shared.domain.ids import completion_event_id, job_id_for, task_name_for


def test_a_job_id_is_32_lowercase_base32_characters() -> None:
    assert job_id_for("c", "k4") == "5zawfkry7qbf3g64443b52bx5hkrsu3x"


def test_a_task_name_is_t_and_32_lowercase_base32_characters() -> None:
    assert task_name_for("j", 2) == "t-bxqpm4dmuy3tsbswl2ydozufgqgqh7vx"


def test_an_event_id_is_e_and_32_lowercase_base32_characters() -> None:
    assert completion_event_id("j49") == "e-u6qhnhngy5oxd7hu2ce4r4v66fvpj4mx"
