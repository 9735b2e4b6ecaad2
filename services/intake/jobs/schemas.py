"""The grading request body: validated field by field, unknown fields refused."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Annotated, Any, Literal

from pydantic import (
    AwareDatetime,
    BaseModel,
    ConfigDict,
    Field,
    StringConstraints,
    ValidationError,
    field_validator,
    model_validator,
)

from shared.domain.errors import ValidationFailed
from shared.domain.job import GradingRequest
from shared.domain.rubric import criteria_of
from shared.domain.status import JobStatus
from shared.domain.uploads import FileRef
from shared.service_layer.intake import MAX_SCHEDULE_AHEAD

MAX_ANSWER_BYTES = 100 * 1024
MAX_METADATA_BYTES = 4 * 1024
MAX_SCHEDULE_DAYS = MAX_SCHEDULE_AHEAD.days


def _rfc3339(moment: datetime) -> str:
    return moment.astimezone(UTC).isoformat().replace("+00:00", "Z")


Text = Annotated[str, StringConstraints(strip_whitespace=False, min_length=1, max_length=256)]
Criterion = Annotated[str, StringConstraints(min_length=1, max_length=2000)]


class FileIn(BaseModel):
    """One uploaded file a job names: the upload id and what was declared for it."""

    model_config = ConfigDict(extra="forbid", strict=True)

    upload_id: Annotated[str, StringConstraints(pattern=r"^up_[A-Za-z0-9_-]{1,64}$")]
    content_type: Annotated[str, StringConstraints(min_length=1, max_length=100)]
    size: int = Field(gt=0)
    name: Annotated[str, StringConstraints(max_length=256)] = ""


class GradingJobIn(BaseModel):
    """POST /v1/grading-jobs body."""

    model_config = ConfigDict(extra="forbid", strict=True)

    submission_id: Text
    assignment_id: Text | None = None
    student_id: Text | None = Field(
        default=None, description="your id of the student: DELETE /v1/students/{id} erases theirs"
    )
    answer: str = Field(default="", description="the text answer; may be empty with files")
    files: list[FileIn] = Field(
        default_factory=list,
        max_length=100,
        description="uploads (POST /v1/uploads) graded beside or instead of the answer",
    )
    rubric: (
        Annotated[str, StringConstraints(min_length=1, max_length=20_000)]
        | Annotated[list[Criterion], Field(min_length=1, max_length=100)]
    )
    max_score: float = Field(default=10.0, gt=0, le=1_000_000)
    callback_url: Annotated[str, StringConstraints(max_length=2048)] | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)
    not_before: Annotated[AwareDatetime, Field(strict=False)] | None = Field(
        default=None,
        description=(
            "RFC 3339 date-time with an offset; grading starts no earlier, at most "
            f"{MAX_SCHEDULE_DAYS} days ahead"
        ),
    )

    lane: Annotated[str, StringConstraints(pattern=r"^[a-z][a-z0-9-]{0,62}$")] | None = Field(
        default=None,
        description=(
            "The priority lane (a queue of shared/config/queues.json, e.g. exam, grading, "
            "bulk); omitted: the client's default lane. A lane the client may not use is "
            "answered 403 lane-not-allowed."
        ),
    )

    deadline: Literal["hours"] | None = Field(
        default=None,
        description=(
            'How long the grading may take: "hours" lets a provider batch grade it at the '
            "batch price, within 24 hours (docs/graders.md#batch-mode); omitted: as soon "
            "as possible."
        ),
    )

    @field_validator("answer")
    @classmethod
    def _answer_size(cls, value: str) -> str:
        if len(value.encode()) > MAX_ANSWER_BYTES:
            raise ValueError(f"must be at most {MAX_ANSWER_BYTES} bytes of UTF-8")
        return value

    @model_validator(mode="after")
    def _answer_or_files(self) -> GradingJobIn:
        if not self.answer and not self.files:
            raise ValueError("give an answer, files, or both")
        return self

    @field_validator("not_before", mode="before")
    @classmethod
    def _rfc3339_text(cls, value: object) -> object:
        if value is not None and not isinstance(value, str):
            raise ValueError("must be an RFC 3339 date-time string")
        return value

    @field_validator("rubric")
    @classmethod
    def _has_criteria(cls, value: str | list[str]) -> str | list[str]:
        if not criteria_of(value):
            raise ValueError("must name at least one criterion (blank items do not count)")
        return value

    @field_validator("callback_url")
    @classmethod
    def _https(cls, value: str | None) -> str | None:
        from urllib.parse import urlsplit

        if value is None:
            return value
        parts = urlsplit(value)
        if parts.scheme != "https" or not parts.hostname:
            raise ValueError("must be an absolute https URL")
        if "@" in parts.netloc:
            # Credentials in the URL would be stored with the job and sent on every try.
            raise ValueError("must not carry user information (user:password@)")
        return value

    @field_validator("metadata")
    @classmethod
    def _metadata_size(cls, value: dict[str, Any]) -> dict[str, Any]:
        if len(json.dumps(value, separators=(",", ":")).encode()) > MAX_METADATA_BYTES:
            raise ValueError(f"must serialise to at most {MAX_METADATA_BYTES} bytes")
        return value

    def to_request(self) -> GradingRequest:
        return GradingRequest(
            submission_id=self.submission_id,
            assignment_id=self.assignment_id,
            answer=self.answer,
            rubric=tuple(self.rubric) if isinstance(self.rubric, list) else self.rubric,
            max_score=self.max_score,
            callback_url=self.callback_url,
            metadata=self.metadata,
            not_before=_rfc3339(self.not_before) if self.not_before else None,
            lane=self.lane,
            files=tuple(FileRef(f.upload_id, f.content_type, f.size, f.name) for f in self.files),
            student_id=self.student_id,
            deadline=self.deadline,
        )


class JobListQuery(BaseModel):
    """GET /v1/grading-jobs query: filters, page size and the cursor of the next page."""

    model_config = ConfigDict(extra="forbid")

    status: JobStatus | None = None
    submission_id: Text | None = None
    cursor: Annotated[str, StringConstraints(min_length=1, max_length=512)] | None = None
    limit: int = Field(default=20, ge=1, le=100)


def parse_list_query(args: dict[str, str]) -> JobListQuery:
    """Validate the list query string; raise ValidationFailed listing every bad parameter."""
    try:
        return JobListQuery.model_validate(args)
    except ValidationError as exc:
        raise _failed(exc, "invalid query parameters") from exc


def _failed(
    exc: ValidationError, summary: str, extra: list[dict[str, str]] | None = None
) -> ValidationFailed:
    errors = list(extra or [])
    for err in exc.errors(include_url=False):
        # A union reports each branch; name the field, not the branch.
        loc = [p for p in err["loc"] if not (isinstance(p, str) and "[" in p)]
        if loc and loc[0] == "rubric" and len(loc) > 1 and not isinstance(loc[1], int):
            loc = loc[:1]
        errors.append({"field": ".".join(str(p) for p in loc), "message": err["msg"]})
    unique = [dict(t) for t in dict.fromkeys(tuple(sorted(e.items())) for e in errors)]
    fields = sorted({e["field"] for e in unique})
    return ValidationFailed(f"{summary}: {', '.join(fields)}", errors=unique)


def parse_grading_request(payload: object) -> GradingRequest:
    """Validate a decoded JSON body; raise ValidationFailed listing every bad field."""
    if not isinstance(payload, dict):
        raise ValidationFailed(
            "the body must be a JSON object",
            errors=[{"field": "", "message": "expected an object"}],
        )
    try:
        return GradingJobIn.model_validate(payload).to_request()
    except ValidationError as exc:
        # Named with the other bad fields (the model's own check runs only when they pass).
        extra = []
        if "answer" not in payload and not payload.get("files"):
            extra.append({"field": "answer", "message": "give an answer, files, or both"})
        raise _failed(exc, "invalid fields", extra) from exc
