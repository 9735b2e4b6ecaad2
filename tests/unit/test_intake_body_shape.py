"""The body's shape limits: a small body is judged by byte counts, without the token scan,
and the counts never let through what the scan refuses."""

from __future__ import annotations

import pytest

from services.intake.limits import body
from services.intake.limits.body import MAX_KEY_BYTES, check_json_shape
from shared.domain.errors import GradeqError
from shared.http.errors import JsonTooComplex, NestingTooDeep

COMMON = b'{"submission_id": "s-1", "answer": "ATP", "rubric": ["mentions ATP"]}'


class _NoScan:
    def finditer(self, raw: bytes) -> object:
        raise AssertionError("the token scan ran")


def test_a_small_body_within_the_limits_is_not_scanned(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(body, "_TOKEN", _NoScan())
    check_json_shape(COMMON, 32, 4096)


def test_a_body_longer_than_a_key_may_be_is_scanned(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(body, "_TOKEN", _NoScan())
    long_key = b'{"' + b"k" * (MAX_KEY_BYTES + 1) + b'": 1}'
    with pytest.raises(AssertionError, match="scan ran"):
        check_json_shape(long_key, 32, 4096)


@pytest.mark.parametrize(
    ("raw", "max_depth", "max_tokens", "refusal"),
    [
        (b"[" * 33 + b"]" * 33, 32, 4096, NestingTooDeep),  # 66 bytes, one level too deep
        (b'{"a": [' + b"[" * 30 + b"]" * 30 + b"]}", 31, 4096, NestingTooDeep),
        (b"[" + b"1," * 20 + b"1]", 32, 10, JsonTooComplex),  # small, past the tokens
        (b'{"' + b"k" * (MAX_KEY_BYTES + 1) + b'": 1}', 32, 4096, JsonTooComplex),
    ],
)
def test_the_counts_let_nothing_through_the_scan_refuses(
    raw: bytes, max_depth: int, max_tokens: int, refusal: type[GradeqError]
) -> None:
    with pytest.raises(refusal):
        check_json_shape(raw, max_depth, max_tokens)


def test_brackets_inside_strings_only_send_a_small_body_to_the_scan() -> None:
    within = b'{"answer": "' + b"[" * 40 + b'"}'  # 40 brackets, but in a string
    assert not body.within_shape_by_counts(within, 32, 4096)
    check_json_shape(within, 32, 4096)  # the scan reads them as a string: within limits
