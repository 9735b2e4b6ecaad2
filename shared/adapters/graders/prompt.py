"""The grading prompt, read from versioned files, and the request rendered as data.

Each version is a folder under `prompts/`: `system.md` (the instructions) and
`response.schema.json` (the JSON Schema of the model's answer). A change to either makes
a new version; the job result records the version that graded it.

The student's answer never enters the instructions: the user message is one JSON
document (`max_score`, `criteria`, `answer`) whose string escaping keeps the answer
inside its field whatever it says.

Everything an assignment's answers share comes first and renders byte for byte the same
for each of them: the instructions, the response schema (a per-rubric constant), the
score and the criteria. The answer (and the names of its files) comes last. Providers
cache a prompt's prefix (OpenAI automatically, Gemini implicitly and through explicit
context caches) only when it is byte-identical, so this order is what makes the rubric
billed at the cached-input price from the second answer on (see docs/cost.md).
"""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import json
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from typing import Any

from shared.adapters.graders.parts import Attachment, FileReader
from shared.domain.errors import PermanentGradingError
from shared.domain.job import GradingRequest
from shared.domain.rubric import criteria_of
from shared.domain.uploads import FileUnusable

DEFAULT_PROMPT_VERSION = "grading-v1"
#: A rough, provider-independent count used only to reserve tokens before a request.
CHARS_PER_TOKEN = 4
#: The line that opens the answer's field in the rendered user document.
_ANSWER_LINE = '\n "answer": '


@dataclass(frozen=True)
class Criterion:
    id: str
    text: str


@dataclass(frozen=True)
class RenderedPrompt:
    """What one grading request sends: instructions, data, and the answer's schema."""

    version: str
    system: str
    user: str
    schema: dict[str, Any]
    criteria: tuple[Criterion, ...]
    max_score: float
    #: The answer's files, sent as the provider's own parts after the user message.
    attachments: tuple[Attachment, ...] = ()
    #: Where the answer begins in `user`: everything before it is shared by every answer
    #: graded against the same rubric with the same prompt version.
    answer_at: int = 0
    #: The assignment the answer belongs to and its grading round (None: a lone job).
    assignment_id: str | None = None
    assignment_round: int = 0

    @property
    def shared_user(self) -> str:
        """The user message up to the answer: the score and criteria, no student data."""
        return self.user[: self.answer_at]

    @property
    def answer_part(self) -> str:
        """The user message from the answer on (the answer and its files' names)."""
        return self.user[self.answer_at :]

    def prefix_key(self) -> str:
        """A digest of the shared prefix (instructions, schema, rubric): equal for two
        requests exactly when a provider's prefix cache can serve one from the other."""
        digest = hashlib.sha256()
        for piece in (
            self.version,
            self.system,
            json.dumps(self.schema, sort_keys=True),
            self.shared_user,
        ):
            digest.update(piece.encode())
            digest.update(b"\0")
        return digest.hexdigest()[:32]

    def estimated_prefix_tokens(self) -> int:
        """The shared prefix's tokens, estimated from its length."""
        return (len(self.system) + len(self.shared_user)) // CHARS_PER_TOKEN

    def estimated_input_tokens(self) -> int:
        """Input tokens, estimated from the text's length and the files (never counted by
        the provider before the request)."""
        files = sum(a.estimated_tokens() for a in self.attachments)
        return (len(self.system) + len(self.user)) // CHARS_PER_TOKEN + files

    def estimated_tokens(self, max_output_tokens: int) -> int:
        """Input tokens (estimated from length and files) plus the output budget."""
        return self.estimated_input_tokens() + max_output_tokens


@dataclass(frozen=True)
class GradingPrompt:
    """One prompt version: the system instructions and the response schema."""

    version: str
    system: str
    schema: dict[str, Any]
    #: Reads a job's uploaded files; None: a job with files cannot be graded.
    files: FileReader | None = field(default=None, compare=False)

    def with_files(self, reader: FileReader) -> GradingPrompt:
        """This version, reading jobs' files with `reader`."""
        return dataclasses.replace(self, files=reader)

    @classmethod
    @cache
    def load(cls, version: str = DEFAULT_PROMPT_VERSION) -> GradingPrompt:
        """Read a version from package data; raise ValueError for an unknown one."""
        folder = resources.files(__package__).joinpath("prompts", version)
        if not folder.joinpath("system.md").is_file():
            raise ValueError(f"unknown prompt version {version!r}")
        system = folder.joinpath("system.md").read_text("utf-8").strip()
        schema = json.loads(folder.joinpath("response.schema.json").read_text("utf-8"))
        return cls(version, system, schema)

    def render(self, request: GradingRequest) -> RenderedPrompt:
        """The prompt for one request; raise PermanentGradingError for an empty rubric."""
        texts = criteria_of(request.rubric)
        if not texts:
            raise PermanentGradingError("the rubric has no criteria to grade against")
        criteria = tuple(Criterion(f"c{i}", text) for i, text in enumerate(texts, 1))
        # Key order is the wire order: the shared fields first, the answer last.
        document = {
            "max_score": request.max_score,
            "criteria": [{"id": c.id, "text": c.text} for c in criteria],
            "answer": request.answer,
        }
        attachments: tuple[Attachment, ...] = ()
        if request.files:
            if self.files is None:
                raise FileUnusable("this grader is not set up to read uploaded files")
            attachments = self.files.read(request.files)
            # The files follow as parts of their own; the document names them.
            document["files"] = [a.label for a in attachments]
        user = json.dumps(document, ensure_ascii=False, indent=1)
        # The criteria's texts are JSON strings (a newline inside is escaped), so the
        # first line that opens the "answer" field is the field itself.
        answer_at = user.index(_ANSWER_LINE) + 1
        return RenderedPrompt(
            version=self.version,
            system=self.system,
            user=user,
            schema=self._schema_for(criteria, request.max_score),
            criteria=criteria,
            max_score=request.max_score,
            attachments=attachments,
            answer_at=answer_at,
            assignment_id=request.assignment_id,
            assignment_round=request.assignment_round,
        )

    def _schema_for(self, criteria: tuple[Criterion, ...], max_score: float) -> dict[str, Any]:
        # Constrain the answer to this rubric, so constrained decoding helps the model
        # get it right; the parser checks the same things again.
        schema = copy.deepcopy(self.schema)
        verdicts = schema["properties"]["criteria"]
        verdicts["minItems"] = verdicts["maxItems"] = len(criteria)
        verdicts["items"]["properties"]["id"]["enum"] = [c.id for c in criteria]
        schema["properties"]["score"].update(minimum=0, maximum=max_score)
        return schema
