"""The ids are persisted and compared across deployments, so their derivation is pinned.

A job id answers a client's retry, a task name dedupes an enqueue for an hour, an event
id dedupes deliveries at every subscriber: an accidental change of any derivation would
turn retries into second jobs and redeliveries into second notifications.
"""

from __future__ import annotations

import re

from shared.domain.ids import completion_event_id, job_id_for, task_name_for

BASE32_160 = re.compile(r"^[a-z2-7]{32}$")


def test_job_id_is_pinned_and_depends_on_client_and_key() -> None:
    assert job_id_for("client-a", "key-1") == "gnuqtzh3xn76lqhpwptniy6lrvt7nh7z"
    assert job_id_for("client-a", "key-2") == "z2xr2ujwb6t62yvxuakgb5toh2qcdvuw"
    assert job_id_for("client-b", "key-1") == "p5npxtj5ua6fq3pugepbfthe36mzynuq"


def test_task_name_is_pinned_per_generation() -> None:
    assert task_name_for("abc", 0) == "t-5q2hefk6nn5kos7ffuppin3qzxtcstqu"
    assert task_name_for("abc", 1) == "t-3pghdy5v6rzr5hnc3tfwextdmwro5xgk"


def test_event_id_is_pinned() -> None:
    assert completion_event_id("abc") == "e-zawy6en74bsjnhiazvxhah3ohlh4jw4k"


def test_ids_are_160_bit_lowercase_base32_without_padding() -> None:
    assert BASE32_160.match(job_id_for("c", "k"))
    assert BASE32_160.match(task_name_for("j", 7).removeprefix("t-"))
    assert BASE32_160.match(completion_event_id("j").removeprefix("e-"))


def test_fields_are_separated_so_shifted_boundaries_differ() -> None:
    assert job_id_for("ab", "c") != job_id_for("a", "bc")
    assert task_name_for("j1", 0) != task_name_for("j", 10)
