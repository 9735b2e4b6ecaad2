"""Every derived id pinned as a literal: the scope each hashes, its prefix, its fields.

Ids are stored (jobs, assignments, tasks, events subscribers dedupe on), so a change to
how one is derived orphans what was stored under the old one. Each field of a scope is
varied on its own to show that it takes part in the id.
"""

from __future__ import annotations

from shared.domain.ids import (
    assignment_graded_event_id,
    assignment_id_for,
    completion_event_id,
    grade_posted_event_id,
    grade_reviewed_event_id,
    job_id_for,
    submission_job_id,
    task_name_for,
)


def test_a_deferred_task_is_named_by_its_deferral_count() -> None:
    assert task_name_for("j", 2, 1) == "t-z6krc4o733nnjnvb5wo6xn6g3asdw5ie"
    assert task_name_for("j", 2, 3) == "t-g5ea2245ams2uzs3rtct736vn5gkaypo"


def test_deferral_zero_is_the_generations_first_task() -> None:
    assert task_name_for("j", 2, 0) == task_name_for("j", 2) == "t-bxqpm4dmuy3tsbswl2ydozufgqgqh7vx"


def test_a_replays_completion_event_is_its_own_per_generation() -> None:
    assert completion_event_id("j49", 1) == "e-jlljnwlfbszwh6o4tnddpvgvaxd5fq6e"
    assert completion_event_id("j49", 2) == "e-534h7optnrda325g6sciiltg3kcmrj4w"
    assert completion_event_id("j49", 0) == "e-u6qhnhngy5oxd7hu2ce4r4v66fvpj4mx"


def test_an_assignment_id_derives_from_the_client_and_its_key() -> None:
    assert assignment_id_for("c", "k4") == "a-gq3dsmsrfgtt2s4kr6vmqujouyzf3ev6"
    assert assignment_id_for("c", "k5") == "a-tjwh3dwknaqjzl4sjg4bmrhr4iicqw3o"
    assert assignment_id_for("d", "k4") == "a-gfhtgexqgh4xlbxh2svz3it4siakkhr2"


def test_an_assignment_id_is_not_the_job_id_of_the_same_key() -> None:
    assert assignment_id_for("c", "k4") != "a-" + job_id_for("c", "k4")


def test_a_submissions_job_is_the_job_of_its_assignment_and_submission() -> None:
    assert submission_job_id("c", "a-1", "s1") == "w2p77k6uxdar6fw3l7pq3wgnuetrlrub"
    assert submission_job_id("c", "a-1", "s1") == job_id_for("c", "assignment\0a-1\0s1")
    assert submission_job_id("c", "a-1", "s2") != submission_job_id("c", "a-1", "s1")


def test_an_assignment_graded_event_is_one_per_round_and_count() -> None:
    assert assignment_graded_event_id("a-1", 1, 3) == "e-qkcrtnx4ahm5l6iq26gzhhoxzwhfu3r3"
    assert assignment_graded_event_id("a-1", 2, 3) == "e-2j2zuwx55ueqtszya5f5cddbwlecango"
    assert assignment_graded_event_id("a-1", 1, 4) == "e-qiny667biplvtzfd3r5rssawx24o62ml"


def test_a_grade_reviewed_event_is_one_per_generation_and_review() -> None:
    assert grade_reviewed_event_id("j", 1, 1) == "e-ezopakxm2jcklkjwkxandils42jb4ozb"
    assert grade_reviewed_event_id("j", 1, 2) == "e-7oohqeomydaydpmfqfn4mhgihffdr43p"
    assert grade_reviewed_event_id("j", 2, 1) == "e-i2c4x5k2tpreok2vcgmvt6a5pzcimmfq"


def test_a_grade_posted_event_is_one_per_version() -> None:
    assert grade_posted_event_id("j", 1) == "e-ecgkx6ardqiy5nwojiws26drwvykvgnb"
    assert grade_posted_event_id("j", 2) == "e-fnhqzpwqsaty3jwewueno3mhq66k6zse"
