"""Uploaded files reach each provider as its API defines them (requests recorded, no network).

Gemini on Vertex AI gets `gs://` references (the worker reads nothing), the Gemini API
inline bytes, OpenAI-compatible servers `image_url` and `file` parts; archives arrive as
text parts; the offline grader reads text and names what it cannot read.
"""

from __future__ import annotations

import base64
import dataclasses
import json
from datetime import datetime

import httpx2
import openai
import pytest
from google import genai
from google.genai import types
from google.oauth2.credentials import Credentials

from shared.adapters.graders.gemini import GeminiChat
from shared.adapters.graders.limiter import QuotaShare, RollingLimiter
from shared.adapters.graders.llm import ModelGrader
from shared.adapters.graders.openai_compat import OpenAICompatChat
from shared.adapters.graders.parts import FileReader
from shared.adapters.graders.prompt import GradingPrompt
from shared.adapters.graders.rubric import RubricGrader
from shared.domain.authorization import Owner
from shared.domain.errors import PermanentGradingError
from shared.domain.job import GradingRequest
from shared.domain.uploads import FileRef, FileUnusable, UploadLimits
from shared.ports import BlobInfo, SignedUpload
from tests.support import files
from tests.unit.test_openai_grader import GOOD, REQUEST, Recorder

BUCKET = "demo-uploads"


class MemoryBlobs:
    """A BlobStore in memory that counts reads; `uri` as Cloud Storage names objects."""

    def __init__(self, *, cloud: bool) -> None:
        self.objects: dict[str, tuple[bytes, str]] = {}
        self.reads: list[str] = []
        self._cloud = cloud

    def add(self, name: str, data: bytes, content_type: str) -> FileRef:
        self.objects[f"uploads/o/{name}"] = (data, content_type)
        return FileRef(name, content_type, len(data), f"{name}.file", f"uploads/o/{name}")

    def signed_put(
        self,
        name: str,
        content_type: str,
        size: int,
        expires_at: datetime,
        owner: Owner | None = None,
    ) -> SignedUpload:
        return SignedUpload("", {}, expires_at)

    def stat(self, name: str) -> BlobInfo | None:
        found = self.objects.get(name)
        return BlobInfo(len(found[0]), found[1]) if found else None

    def read(self, name: str, max_bytes: int) -> bytes:
        self.reads.append(name)
        return self.objects[name][0][:max_bytes]

    def uri(self, name: str) -> str:
        return f"gs://{BUCKET}/{name}" if self._cloud else ""

    def delete(self, names: list[str]) -> None:
        for name in names:
            self.objects.pop(name, None)

    def delete_under(self, prefix: str) -> list[str]:
        names = sorted(name for name in self.objects if name.startswith(prefix))
        self.delete(names)
        return names


def _reader(blobs: MemoryBlobs, *, by_reference: bool) -> FileReader:
    return FileReader(blobs, UploadLimits(), by_reference=by_reference)


def _with(*refs: FileRef, answer: str = "") -> GradingRequest:
    return dataclasses.replace(REQUEST, answer=answer, files=refs)


def _gemini(blobs: MemoryBlobs, *, vertex: bool) -> tuple[ModelGrader, Recorder]:
    def reply(_request: httpx2.Request) -> httpx2.Response:
        body = {
            "candidates": [
                {
                    "content": {"role": "model", "parts": [{"text": json.dumps(GOOD)}]},
                    "finishReason": "STOP",
                }
            ],
            "usageMetadata": {
                "promptTokenCount": 1400,
                "candidatesTokenCount": 60,
                "totalTokenCount": 1460,
            },
        }
        return httpx2.Response(200, json=body)

    recorder = Recorder(reply)
    options = types.HttpOptions(
        httpx_client=httpx2.Client(transport=httpx2.MockTransport(recorder))
    )
    if vertex:
        client = genai.Client(
            vertexai=True,
            project="demo-project",
            location="europe-west1",
            credentials=Credentials(token="adc-access-token"),  # type: ignore[no-untyped-call]
            http_options=options,
        )
    else:
        client = genai.Client(api_key="AIza-test", http_options=options)
    prompt = GradingPrompt.load().with_files(_reader(blobs, by_reference=vertex))
    chat = GeminiChat(client, "gemini-2.5-flash", max_output_tokens=1024)
    return ModelGrader(chat, RollingLimiter(QuotaShare(100, 0)), prompt, 1024), recorder


def _openai(blobs: MemoryBlobs) -> tuple[ModelGrader, Recorder]:
    def reply(_request: httpx2.Request) -> httpx2.Response:
        body = {
            "id": "c1",
            "object": "chat.completion",
            "created": 0,
            "model": "m",
            "choices": [
                {
                    "index": 0,
                    "finish_reason": "stop",
                    "message": {"role": "assistant", "content": json.dumps(GOOD)},
                }
            ],
            "usage": {"prompt_tokens": 900, "completion_tokens": 50, "total_tokens": 950},
        }
        return httpx2.Response(200, json=body)

    recorder = Recorder(reply)
    client = openai.OpenAI(
        base_url="http://127.0.0.1:9/v1",
        api_key="k",
        max_retries=0,
        http_client=httpx2.Client(transport=httpx2.MockTransport(recorder)),
    )
    prompt = GradingPrompt.load().with_files(_reader(blobs, by_reference=False))
    chat = OpenAICompatChat(client, "m", max_output_tokens=512)
    return ModelGrader(chat, RollingLimiter(QuotaShare(100, 0)), prompt, 512), recorder


def test_gemini_on_vertex_gets_gs_references_and_the_worker_reads_nothing() -> None:
    blobs = MemoryBlobs(cloud=True)
    page = blobs.add("page", files.png(), "image/png")
    essay = blobs.add("essay", files.pdf(), "application/pdf")
    grader, recorder = _gemini(blobs, vertex=True)
    result = grader.grade(_with(page, essay), attempt=1, timeout_s=30)
    [body] = recorder.bodies()
    parts = body["contents"][0]["parts"]
    assert json.loads(parts[0]["text"])["files"] == [
        "page.file (image/png)",
        "essay.file (application/pdf)",
    ]
    # Proto JSON: the SDK sends the inner names snake_case; the API accepts both forms.
    assert parts[1] == {
        "fileData": {"file_uri": f"gs://{BUCKET}/uploads/o/page", "mime_type": "image/png"}
    }
    assert parts[2] == {
        "fileData": {"file_uri": f"gs://{BUCKET}/uploads/o/essay", "mime_type": "application/pdf"}
    }
    assert blobs.reads == []
    assert result.usage["input_tokens"] == 1400  # recorded as for text answers


def test_the_gemini_api_gets_the_bytes_inline() -> None:
    blobs = MemoryBlobs(cloud=True)
    page = blobs.add("page", files.png(), "image/png")
    grader, recorder = _gemini(blobs, vertex=False)
    grader.grade(_with(page), attempt=1, timeout_s=30)
    [body] = recorder.bodies()
    inline = body["contents"][0]["parts"][1]["inlineData"]
    assert inline["mime_type"] == "image/png"
    assert base64.b64decode(inline["data"]) == files.png()


def test_files_too_large_for_the_gemini_apis_inline_limit_fail_before_sending() -> None:
    blobs = MemoryBlobs(cloud=False)
    big = files.pdf(padding=8 * 1024 * 1024)
    refs = (blobs.add("a", big, "application/pdf"), blobs.add("b", big, "application/pdf"))
    grader, recorder = _gemini(blobs, vertex=False)
    with pytest.raises(FileUnusable, match="inline"):
        grader.grade(_with(*refs), attempt=1, timeout_s=30)
    assert recorder.requests == []


def test_openai_compatible_gets_image_url_and_file_parts() -> None:
    blobs = MemoryBlobs(cloud=False)
    page = blobs.add("page", files.png(), "image/png")
    essay = blobs.add("essay", files.pdf(), "application/pdf")
    grader, recorder = _openai(blobs)
    result = grader.grade(_with(page, essay, answer="see the photo"), attempt=1, timeout_s=30)
    [body] = recorder.bodies()
    content = body["messages"][1]["content"]
    assert content[0]["type"] == "text" and "see the photo" in content[0]["text"]
    png_url = "data:image/png;base64," + base64.b64encode(files.png()).decode()
    assert content[1] == {"type": "image_url", "image_url": {"url": png_url}}
    pdf_url = "data:application/pdf;base64," + base64.b64encode(files.pdf()).decode()
    assert content[2] == {"type": "file", "file": {"filename": "essay.file", "file_data": pdf_url}}
    assert result.usage["total_tokens"] == 950


def test_a_text_only_job_still_sends_a_plain_string() -> None:
    grader, recorder = _openai(MemoryBlobs(cloud=False))
    grader.grade(REQUEST, attempt=1, timeout_s=30)
    assert isinstance(recorder.bodies()[0]["messages"][1]["content"], str)


def test_an_archive_arrives_as_text_parts_named_by_path() -> None:
    blobs = MemoryBlobs(cloud=False)
    archive = files.zip_of({"lab/main.py": b"print('ATP')\n", "lab/notes.md": b"glycolysis\n"})
    ref = blobs.add("code", archive, "application/zip")
    grader, recorder = _openai(blobs)
    grader.grade(_with(ref), attempt=1, timeout_s=30)
    content = recorder.bodies()[0]["messages"][1]["content"]
    texts = [part["text"] for part in content[1:]]
    assert texts == [
        "File code.file/lab/main.py:\nprint('ATP')\n",
        "File code.file/lab/notes.md:\nglycolysis\n",
    ]


def test_a_file_gone_from_the_store_is_a_permanent_named_failure() -> None:
    blobs = MemoryBlobs(cloud=False)
    ref = blobs.add("page", files.png(), "image/png")
    blobs.delete([ref.object])
    grader, recorder = _openai(blobs)
    with pytest.raises(FileUnusable, match=r"page\.file") as raised:
        grader.grade(_with(ref), attempt=1, timeout_s=30)
    assert isinstance(raised.value, PermanentGradingError)
    assert raised.value.slug == "grading-file-unusable"
    assert recorder.requests == []


def test_a_grader_without_a_file_reader_fails_permanently() -> None:
    blobs = MemoryBlobs(cloud=False)
    ref = blobs.add("page", files.png(), "image/png")
    prompt = GradingPrompt.load()
    with pytest.raises(FileUnusable):
        prompt.render(_with(ref))


def test_the_offline_grader_reads_text_and_names_what_it_cannot_read() -> None:
    blobs = MemoryBlobs(cloud=False)
    notes = blobs.add("notes", b"The mitochondria make ATP.", "text/plain")
    page = blobs.add("page", files.png(), "image/png")
    grader = RubricGrader(simulate=False, files=_reader(blobs, by_reference=False))
    result = grader.grade(_with(notes, page), attempt=1, timeout_s=5)
    assert [c["met"] for c in result.criteria] == [True, True, False]
    assert "Not read (the offline grader reads text only): page.file (image/png)" in result.feedback
    assert blobs.reads == [notes.object]


def test_the_offline_grader_fails_permanently_on_a_photo_alone() -> None:
    blobs = MemoryBlobs(cloud=False)
    page = blobs.add("page", files.png(), "image/png")
    grader = RubricGrader(simulate=False, files=_reader(blobs, by_reference=False))
    with pytest.raises(FileUnusable, match=r"page.file \(image/png\)"):
        grader.grade(_with(page), attempt=1, timeout_s=5)
