"""The policy's own rules: how a caller relates to an object, narrowing, stored owners."""

from __future__ import annotations

import pytest

from shared.domain.authorization import (
    POLICY,
    SERVER,
    Action,
    Forbidden,
    Owner,
    Principal,
    Relation,
    Role,
    as_principal,
    authorize,
    owner_of,
)
from shared.domain.errors import JobNotFound

TEACHER = Principal("school-a", "t-1", Role.TEACHER)
STUDENT = Principal("school-a", "ada", Role.STUDENT)


def missing(detail: str) -> JobNotFound:
    return JobNotFound(detail)


def test_an_object_relates_to_the_caller_by_school_then_author() -> None:
    assert TEACHER.relation(Owner("school-a", "t-1")) is Relation.OWN
    assert TEACHER.relation(Owner("school-a", "ada")) is Relation.SAME_SCHOOL
    assert TEACHER.relation(Owner("school-b", "t-1")) is Relation.OTHER_SCHOOL


def test_a_student_reads_their_own_work_only_and_the_school_reads_all_of_it() -> None:
    own, classmate = Owner("school-a", "ada"), Owner("school-a", "bo")
    authorize(STUDENT, Action.JOB_READ, own, missing, Action.JOB_READ)
    with pytest.raises(JobNotFound):
        authorize(STUDENT, Action.JOB_READ, classmate, missing, Action.JOB_READ)
    with pytest.raises(Forbidden):  # readable, but erasure is the school's
        authorize(STUDENT, Action.JOB_ERASE, own, missing, Action.JOB_READ)
    for staff in (TEACHER, as_principal("school-a")):
        authorize(staff, Action.JOB_ERASE, own, missing, Action.JOB_READ)


def test_another_schools_object_is_missing_whatever_the_role() -> None:
    foreign = Owner("school-b", SERVER)
    for role in (Role.SERVER, Role.TEACHER, Role.REVIEWER, Role.STUDENT):
        with pytest.raises(JobNotFound):
            authorize(
                Principal("school-a", "x", role), Action.JOB_READ, foreign, missing, Action.JOB_READ
            )


def test_a_hidden_object_is_refused_in_the_words_of_a_missing_one() -> None:
    details = []
    for owner in (None, Owner("school-a", "bo"), Owner("school-b", SERVER)):
        with pytest.raises(JobNotFound) as refused:
            authorize(STUDENT, Action.JOB_READ, owner, missing, Action.JOB_READ)
        details.append(refused.value.detail)
    assert details == ["not found"] * 3  # nothing tells a hidden object from a missing one


def test_no_role_but_the_operator_reaches_another_school() -> None:
    for role, actions in POLICY.items():
        for action, relations in actions.items():
            reaches = Relation.OTHER_SCHOOL in relations
            assert reaches is (role is Role.OPERATOR), (role, action)


def test_an_operator_operates_on_every_school_and_may_do_nothing_else() -> None:
    operator = Principal("", "ops", Role.OPERATOR)
    assert operator.may(Action.OPERATE)
    assert operator.may(Action.OPERATE, Owner("school-a", "t-1"))
    assert not operator.may(Action.JOB_READ, Owner("school-a", "t-1"))
    assert not operator.may(Action.JOB_LIST_SCHOOL)


def test_narrowed_staff_see_only_their_own_objects() -> None:
    narrowed = Principal("school-a", "t-1", Role.TEACHER, only_own=True)
    assert narrowed.may(Action.JOB_READ, Owner("school-a", "t-1"))
    assert not narrowed.may(Action.JOB_READ, Owner("school-a", SERVER))
    assert not narrowed.sees_school
    assert narrowed.may(Action.ASSIGNMENT_CREATE)  # actions on no object are unchanged


def test_a_stored_user_scope_reads_as_its_school_and_user() -> None:
    assert owner_of("school-a:user:ada") == Owner("school-a", "ada")
    assert owner_of("school-a:user:ada", SERVER) == Owner("school-a", "ada")
    assert owner_of("school-a") == Owner("school-a", SERVER)
    assert owner_of("school-a", "ada") == Owner("school-a", "ada")
    # A school id never holds the mark: the school is what comes before the first one.
    assert owner_of("school-a:user:odd:user:id") == Owner("school-a", "odd:user:id")
    # The key spaces stay those of before: job ids derived from keys do not change.
    assert Owner("school-a", "ada").scope == "school-a:user:ada"
    assert STUDENT.key_space == "school-a:user:ada" and TEACHER.key_space == "school-a"
