"""Who may do what to which object: the one authorization policy of the API.

Every caller is a `Principal`: the school it speaks for (a client id), its author name
(`server` for the school's API keys, a user id for a signed-in user, `key:<name>` for a
reviewer key) and its role. Every object (job, upload, assignment, review, regrade,
erasure) belongs to a school and names its author (`Owner`). A student's work belongs to
the school: the school's staff act on it, the student on their own only.

`POLICY` is the table of role x action -> the relations (own, same school, other school)
of the object to the caller for which the action is allowed. Services ask `authorize`;
no handler compares ids itself. The answer to a refusal never tells more than the caller
may know: an object the caller may not even read is missing (404, as if it did not
exist, and another school's object is always that); one it may read but not act on is
403 `forbidden`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum

from shared.domain.client_ids import USER_SCOPE_MARK, check_client_id, user_scope
from shared.domain.errors import GradeqError

#: The author name of what a school's server (its API key) does.
SERVER = "server"


class Forbidden(GradeqError):
    slug = "forbidden"
    title = "The caller's role may not do this"
    status = 403


class Role(StrEnum):
    """What a caller is to its school."""

    OPERATOR = "operator"  # runs the service (admin API); belongs to no school
    SERVER = "server"  # the school's server, by API key
    TEACHER = "teacher"  # a signed-in member of staff (role claim teacher or admin)
    REVIEWER = "reviewer"  # a reviewer key, or a signed-in user with the reviewer role
    STUDENT = "student"  # any other signed-in user of the school
    ANONYMOUS = "anonymous"  # no valid credential


class Relation(StrEnum):
    """What an object is to the caller."""

    OWN = "own"  # the caller is its author (in the same school)
    SAME_SCHOOL = "same school"  # the caller's school's, by another author
    OTHER_SCHOOL = "other school"


class Action(StrEnum):
    """What a caller asks to do."""

    JOB_SUBMIT = "job.submit"  # a job into one of the school's assignments
    JOB_CONFIGURE = "job.configure"  # a job that sets its own rubric, score, lane, callback
    JOB_PRACTICE = "job.practice"  # a practice job (school setting; never in the gradebook)
    JOB_LIST_SCHOOL = "job.list-school"  # list every job of the school, not only one's own
    JOB_READ = "job.read"
    JOB_CANCEL = "job.cancel"
    JOB_ERASE = "job.erase"
    STUDENT_ERASE = "student.erase"  # every submission of one student id
    UPLOAD_CREATE = "upload.create"
    UPLOAD_ATTACH = "upload.attach"  # name an upload among a submission's files
    ASSIGNMENT_CREATE = "assignment.create"
    ASSIGNMENT_READ = "assignment.read"
    ASSIGNMENT_LIST = "assignment.list"
    ASSIGNMENT_EDIT = "assignment.edit"  # a new rubric version
    ASSIGNMENT_BATCH = "assignment.submit-batch"
    ASSIGNMENT_GRADES = "assignment.grades"
    ASSIGNMENT_REGRADE = "assignment.regrade"
    ASSIGNMENT_POST = "assignment.post"  # post grades to students and downstream
    REVIEW_LIST = "review.list"
    REVIEW_READ = "review.read"
    REVIEW_DECIDE = "review.decide"  # accept or override a held grade
    REGRADE_REQUEST = "regrade.request"  # a student asks for a second look at a grade
    REGRADE_ANSWER = "regrade.answer"  # keep or change a grade a student asked about
    OPERATE = "operate"  # the operator's admin API, over every school


_ALL = frozenset(Relation)
_SCHOOL = frozenset({Relation.OWN, Relation.SAME_SCHOOL})
_OWN = frozenset({Relation.OWN})
_NONE: frozenset[Relation] = frozenset()

#: What the school's staff (server key, teachers) may do: everything within the school.
_STAFF: dict[Action, frozenset[Relation]] = {
    action: _SCHOOL
    for action in Action
    # Staff set their jobs up; a regrade request is a student's own.
    if action not in (Action.OPERATE, Action.JOB_PRACTICE, Action.REGRADE_REQUEST)
}
#: Reviewers see, review, regrade and erase every submission; they submit nothing and
#: set up no assignments.
_REVIEWER: dict[Action, frozenset[Relation]] = {
    action: relations
    for action, relations in _STAFF.items()
    if action
    not in (
        Action.JOB_SUBMIT,
        Action.JOB_CONFIGURE,
        Action.UPLOAD_CREATE,
        Action.UPLOAD_ATTACH,
        Action.ASSIGNMENT_CREATE,
        Action.ASSIGNMENT_EDIT,
        Action.ASSIGNMENT_BATCH,
    )
}
#: A student submits into the school's assignments and sees, cancels their own work.
_STUDENT: dict[Action, frozenset[Relation]] = {
    Action.JOB_SUBMIT: _SCHOOL,  # into the school's assignment (the school's object)
    Action.JOB_PRACTICE: _SCHOOL,  # only where the school allows practice
    Action.JOB_READ: _OWN,
    Action.JOB_CANCEL: _OWN,
    Action.UPLOAD_CREATE: _SCHOOL,
    Action.UPLOAD_ATTACH: _OWN,  # their own uploads only, never one made for the school
    Action.REGRADE_REQUEST: _OWN,  # on their own grades
}

#: role -> action -> the relations for which it is allowed (absent: never).
POLICY: Mapping[Role, Mapping[Action, frozenset[Relation]]] = {
    Role.OPERATOR: {Action.OPERATE: _ALL},
    Role.SERVER: _STAFF,
    Role.TEACHER: _STAFF,
    Role.REVIEWER: _REVIEWER,
    Role.STUDENT: _STUDENT,
    Role.ANONYMOUS: {},
}


@dataclass(frozen=True)
class Owner:
    """Whose an object is: its school, and its author within the school."""

    school: str
    author: str = SERVER

    @property
    def scope(self) -> str:
        """The school, or for a user's object the user's scope within it (`<school>:user:
        <uid>`, how such objects were stored before they had an author)."""
        return self.school if self.author == SERVER else user_scope(self.school, self.author)


def same_school(a: Owner, b: Owner) -> bool:
    """Whether two objects belong to one school (whoever their authors)."""
    return a.school == b.school


def owner_of(client_id: str, author: str | None = None) -> Owner:
    """Read a stored (client id, author) pair as an owner.

    A client id stored as a signed-in user's scope (`<school>:user:<uid>`, how a user's
    objects were stored before they had an author) is read as that school and user.
    """
    school, mark, uid = client_id.partition(USER_SCOPE_MARK)
    if mark:
        return Owner(school, uid)
    return Owner(client_id, author or SERVER)


@dataclass(frozen=True)
class Principal:
    """The authenticated caller: its school, its author name, its role.

    `only_own` narrows a member of staff to their own objects (the `Gradeq-Scope: user`
    header): others' are as unknown to it as to a student. It never widens anything.
    """

    school: str
    author: str
    role: Role
    only_own: bool = False

    def __post_init__(self) -> None:
        if self.role is not Role.OPERATOR:
            check_client_id(self.school)

    @property
    def owner(self) -> Owner:
        """The owner of what this caller creates."""
        return Owner(self.school, self.author)

    @property
    def key_space(self) -> str:
        """Where the caller's Idempotency-Keys (and submission ids) are unique: a student's
        are their own; the school's staff act for the school and share its keys."""
        return self.owner.scope if self.role is Role.STUDENT else self.school

    def relation(self, owner: Owner) -> Relation:
        if owner.school != self.school:
            return Relation.OTHER_SCHOOL
        return Relation.OWN if owner.author == self.author else Relation.SAME_SCHOOL

    def may(self, action: Action, owner: Owner | None = None) -> bool:
        """Whether the policy allows `action` on an object of `owner` (None: the school's)."""
        relations = POLICY[self.role].get(action, _NONE)
        if self.role is Role.OPERATOR:
            return Relation.OTHER_SCHOOL in relations  # an operator's reach is every school
        if owner is None:
            return Relation.SAME_SCHOOL in relations
        relation = self.relation(owner)
        if self.only_own and relation is Relation.SAME_SCHOOL:
            return False  # narrowed to one's own objects
        return relation in relations

    @property
    def sees_school(self) -> bool:
        """Whether lists show the whole school's objects, not only the caller's own."""
        return not self.only_own and self.may(Action.JOB_LIST_SCHOOL)


def as_principal(caller: Principal | str) -> Principal:
    """The caller; a bare client id stands for that school's server (its API key)."""
    return caller if isinstance(caller, Principal) else Principal(caller, SERVER, Role.SERVER)


def authorize(
    principal: Principal,
    action: Action,
    owner: Owner | None,
    missing: Callable[[str], GradeqError],
    read: Action,
) -> None:
    """Allow `action` on an object of `owner`, or refuse without telling more than allowed.

    `owner` None: the object does not exist. An object the caller may not `read` is
    answered as missing (`missing(detail)`, a 404); one it may read, 403 `forbidden`.
    """
    if owner is None or not principal.may(read, owner):
        raise missing("not found")
    if not principal.may(action, owner):
        raise Forbidden(f"a {principal.role.value} may not {action.value} this object")


def require(principal: Principal, action: Action) -> None:
    """Allow an action on the caller's own school (creating, listing), or 403."""
    if not principal.may(action):
        raise Forbidden(f"a {principal.role.value} may not {action.value}")


def policy_table(roles: Iterable[Role] = tuple(Role)) -> str:
    """The policy as a Markdown table (docs/auth.md prints this very text)."""
    roles = tuple(roles)
    relations = list(Relation)
    head = "| action | " + " | ".join(r.value for r in roles) + " |"
    rule = "| --- |" + " --- |" * len(roles)
    lines = [head, rule]
    for action in Action:
        cells = []
        for role in roles:
            allowed = POLICY[role].get(action, _NONE)
            cell = ", ".join(r.value for r in relations if r in allowed)
            cells.append(cell or "—")
        lines.append(f"| `{action.value}` | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


#: What a job's grading is set by: the assignment and the school, never a student.
SCHOOL_SETTINGS = ("rubric", "max_score", "lane", "callback_url", "review", "release")


class SetByTheSchool(GradeqError):
    """A student's request carried what only the assignment or the school sets."""

    slug = "set-by-the-school"
    title = "The rubric, score, lane, review, release and callback are the school's to set"
    status = 403


class AssignmentRequired(GradeqError):
    """A student sent a job into no assignment of the school, and the school allows no
    practice jobs."""

    slug = "assignment-required"
    title = "A student submits into one of the school's assignments"
    status = 403
