"""The assignment request bodies and queries, validated field by field (unknown refused)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import (
    AwareDatetime,
    BaseModel,
    ConfigDict,
    Field,
    StringConstraints,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from services.intake.jobs.schemas import FileIn, GradingJobIn, Text, _failed
from shared.adapters.graders.prompt import DEFAULT_PROMPT_VERSION, GradingPrompt
from shared.domain.assignment import Rubric
from shared.domain.errors import ValidationFailed
from shared.domain.rubric import criteria_of
from shared.domain.uploads import FileRef
from shared.service_layer.assignments import MAX_BATCH, Answer
from shared.service_layer.regrade_requests import REQUESTS_UNTIL

RubricIn = GradingJobIn.model_fields["rubric"].annotation
#: The longest submission id (the `Text` bound): a refused item echoes one up to this.
MAX_SUBMISSION_ID = 256
Cursor = Annotated[str, StringConstraints(min_length=1, max_length=512)]
#: An RFC 3339 date-time with an offset (sent as a JSON string).
RequestsUntil = Annotated[AwareDatetime, Field(strict=False)]


class ReviewPolicyIn(BaseModel):
    """Which grades a teacher reviews, and whether the student waits (docs/review.md)."""

    model_config = ConfigDict(extra="forbid", strict=True)

    confidence_below: float | None = Field(default=None, ge=0, le=1)
    pass_mark: float | None = Field(default=None, ge=0)
    margin: float = Field(default=0.0, ge=0)
    format_failures: bool = False
    sample_rate: float = Field(default=0.0, ge=0, le=1)
    release: Literal["immediately", "after_review"] = "immediately"
    #: Points a regrade's model grade may move from a teacher's grade before the grade
    #: goes back to the teacher's queue flagged; null: a tenth of the max score.
    regrade_threshold: float | None = Field(default=None, ge=0)


class AssignmentIn(BaseModel):
    """POST /v1/assignments body."""

    model_config = ConfigDict(extra="forbid", strict=True)

    title: Annotated[str, StringConstraints(min_length=1, max_length=500)]
    rubric: RubricIn  # type: ignore[valid-type]
    max_score: float = Field(default=10.0, gt=0, le=1_000_000)
    prompt_version: Text = DEFAULT_PROMPT_VERSION
    review: ReviewPolicyIn | None = None
    regrade_requests_until: RequestsUntil | None = Field(
        default=None,
        description="until when students may ask for a regrade of their grade (RFC 3339 "
        "with an offset); none: the assignment takes no regrade requests",
    )
    #: Whether grades reach students and downstream systems once final ("automatic"), or
    #: when the teacher posts them ("manual").
    posting: Literal["automatic", "manual"] = "automatic"

    @field_validator("prompt_version")
    @classmethod
    def _shipped(cls, value: str) -> str:
        _shipped_prompt(value)
        return value

    @field_validator("rubric")
    @classmethod
    def _has_criteria(cls, value: str | list[str]) -> str | list[str]:
        return _with_criteria(value)

    def settings(self) -> dict[str, Any]:
        """The assignment's settings: its review rules and deadline for regrade requests,
        when it has them, and its posting policy when it posts manually."""
        settings: dict[str, Any] = {}
        if self.review is not None:
            settings["review"] = self.review.model_dump()
        if self.regrade_requests_until is not None:
            settings[REQUESTS_UNTIL] = self.regrade_requests_until.isoformat()
        if self.posting == "manual":
            settings["posting"] = self.posting
        return settings

    def rubric_value(self) -> Rubric:
        rubric: str | list[str] = self.rubric
        return tuple(rubric) if isinstance(rubric, list) else rubric


class RubricRevisionIn(BaseModel):
    """PATCH /v1/assignments/{id} body: the rubric's next version, the deadline for
    regrade requests, or both."""

    model_config = ConfigDict(extra="forbid", strict=True)

    rubric: RubricIn | None = None  # type: ignore[valid-type]
    regrade_requests_until: RequestsUntil | None = None

    @field_validator("rubric")
    @classmethod
    def _has_criteria(cls, value: str | list[str] | None) -> str | list[str] | None:
        return None if value is None else _with_criteria(value)

    @model_validator(mode="after")
    def _changes_something(self) -> RubricRevisionIn:
        if self.rubric is None and self.regrade_requests_until is None:
            raise ValueError("give a rubric, a regrade_requests_until, or both")
        return self

    def rubric_value(self) -> Rubric | None:
        rubric: str | list[str] | None = self.rubric
        return tuple(rubric) if isinstance(rubric, list) else rubric


class AnswerIn(BaseModel):
    """One answer of a batch; `submission_id` is its idempotency key in the assignment."""

    model_config = ConfigDict(extra="forbid", strict=True)

    submission_id: Text
    files: list[FileIn] = Field(
        default_factory=list,
        max_length=100,
        description="uploads (POST /v1/uploads) graded beside or instead of the answer",
    )
    answer: str = Field(
        default="",
        validate_default=True,
        description="the text answer; may be empty with files",
    )
    metadata: dict[str, Any] = Field(default_factory=dict)
    callback_url: Annotated[str, StringConstraints(max_length=2048)] | None = None
    student_id: Text | None = None

    @field_validator("answer")
    @classmethod
    def _answer_or_files(cls, value: str, info: ValidationInfo) -> str:
        if not value and not info.data.get("files"):
            raise ValueError("give an answer, files, or both")
        return value

    @field_validator("answer", "metadata", "callback_url")
    @classmethod
    def _as_for_one_job(cls, value: Any, info: ValidationInfo) -> Any:
        """The same checks as a single job's field (answer and metadata size, https)."""
        return _job_check(info.field_name or "")(value)

    def to_answer(self) -> Answer:
        return Answer(
            self.submission_id,
            self.answer,
            self.metadata,
            self.callback_url,
            self.student_id,
            tuple(FileRef(f.upload_id, f.content_type, f.size, f.name) for f in self.files),
        )


class AssignmentJobIn(AnswerIn):
    """POST /v1/grading-jobs body for an answer to one of your assignments: the rubric,
    max score and prompt version come from the assignment, the key is the submission id."""

    assignment_id: Text


class BatchIn(BaseModel):
    """POST /v1/assignments/{id}/submissions:batch body (each item is checked on its own)."""

    model_config = ConfigDict(extra="forbid", strict=True)

    answers: list[AnswerIn] = Field(min_length=1, max_length=MAX_BATCH)


class PageQuery(BaseModel):
    """A page size and the cursor of the next page."""

    model_config = ConfigDict(extra="forbid")

    cursor: Cursor | None = None
    limit: int = Field(default=20, ge=1, le=100)


class RegradeIn(BaseModel):
    """POST /v1/assignments/{id}/regrade body: what changes for the new round (if anything)."""

    model_config = ConfigDict(extra="forbid", strict=True)

    rubric: RubricIn | None = None  # type: ignore[valid-type]
    prompt_version: Text | None = None
    #: Put every grade a teacher reviewed back in the teacher's queue once regraded (the
    #: teacher's grade stays final until the teacher decides again); recorded on the round.
    reopen_reviewed: bool = False

    @field_validator("prompt_version")
    @classmethod
    def _shipped(cls, value: str | None) -> str | None:
        return _shipped_prompt(value)

    @field_validator("rubric")
    @classmethod
    def _has_criteria(cls, value: str | list[str] | None) -> str | list[str] | None:
        return None if value is None else _with_criteria(value)

    def rubric_value(self) -> Rubric | None:
        rubric: str | list[str] | None = self.rubric
        return tuple(rubric) if isinstance(rubric, list) else rubric


class PostIn(BaseModel):
    """POST /v1/assignments/{id}/grades:post body: the submissions to post (all: null)."""

    model_config = ConfigDict(extra="forbid", strict=True)

    submission_ids: list[Text] | None = Field(default=None, max_length=10_000)


class ReportQuery(BaseModel):
    """GET /v1/assignments/{id}/regrade query: what counts as a changed score."""

    model_config = ConfigDict(extra="forbid")

    threshold: float = Field(default=1.0, ge=0)


_JOB_CHECKS = {"answer": "_answer_size", "metadata": "_metadata_size", "callback_url": "_https"}


def _job_check(field_name: str) -> Any:
    validators = GradingJobIn.__pydantic_decorators__.field_validators
    return validators[_JOB_CHECKS[field_name]].func


def _shipped_prompt(version: str | None) -> str | None:
    """A prompt version the graders have (an unknown one would fail every grading)."""
    if version is None:
        return None
    try:
        GradingPrompt.load(version)
    except ValueError as exc:
        raise ValueError(f"no prompt version {version!r} is shipped") from exc
    return version


def _with_criteria(value: str | list[str]) -> str | list[str]:
    if not criteria_of(value):
        raise ValueError("must name at least one criterion (blank items do not count)")
    return value


def parse(model: type[BaseModel], payload: object, summary: str = "invalid fields") -> Any:
    """Validate a decoded JSON body; raise ValidationFailed listing every bad field."""
    if not isinstance(payload, dict):
        raise ValidationFailed(
            "the body must be a JSON object",
            errors=[{"field": "", "message": "expected an object"}],
        )
    try:
        return model.model_validate(payload)
    except ValidationError as exc:
        raise _failed(exc, summary) from exc


#: An item refused before storing: the submission id it was sent with (None when it sent
#: none that could be one) and why.
Refused = tuple[str | None, ValidationFailed]


def parse_batch(payload: object) -> list[Answer | Refused]:
    """The batch's answers in order, each an Answer or why that one item is refused.

    The envelope (an object with 1 to MAX_BATCH answers) must be valid as a whole.
    """
    if not isinstance(payload, dict) or not isinstance(payload.get("answers"), list):
        raise ValidationFailed(
            "the body must be an object with a list of answers",
            errors=[{"field": "answers", "message": "expected a list"}],
        )
    extra = sorted(set(payload) - {"answers"})
    items: list[Any] = payload["answers"]
    if extra or not 1 <= len(items) <= MAX_BATCH:
        raise ValidationFailed(
            f"a batch holds 1 to {MAX_BATCH} answers and nothing else",
            errors=[{"field": "answers", "message": f"1 to {MAX_BATCH} items"}]
            + [{"field": name, "message": "unknown field"} for name in extra],
        )
    parsed: list[Answer | Refused] = []
    for item in items:
        try:
            parsed.append(parse(AnswerIn, item).to_answer())
        except ValidationFailed as refused:
            parsed.append((_sent_submission_id(item), refused))
    return parsed


def _sent_submission_id(item: object) -> str | None:
    """The item's `submission_id` as sent, when it is a string a submission id could be."""
    sent = item.get("submission_id") if isinstance(item, dict) else None
    return sent if isinstance(sent, str) and 1 <= len(sent) <= MAX_SUBMISSION_ID else None
