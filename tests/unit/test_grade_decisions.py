"""Decisions of a grade result's record: every field it writes is read back as written."""

from __future__ import annotations

import json

from shared.domain.grade import GradeResult


def test_a_grade_read_back_from_its_record_keeps_every_field() -> None:
    grade = GradeResult(
        7.5,
        10.0,
        "good",
        ({"name": "c1", "score": 4},),
        "model",
        "m-1",
        "v2",
        {"input_tokens": 12, "output_tokens": 3, "total_tokens": 15, "requests": 2},
        0.0,  # a confidence of zero is still one
        2,
    )
    record = json.loads(json.dumps(grade.to_dict()))
    assert record["confidence"] == 0.0 and record["format_retries"] == 2
    back = GradeResult.from_dict(record)
    assert back == grade
    assert back.usage == {"input_tokens": 12, "output_tokens": 3, "total_tokens": 15, "requests": 2}
    assert (back.confidence, back.format_retries) == (0.0, 2)


def test_a_records_counts_are_read_as_numbers_and_absent_ones_as_none() -> None:
    record = {
        "score": "3",
        "max_score": 5,
        "feedback": "f",
        "usage": {"input_tokens": "9"},
        "confidence": "0.75",
        "format_retries": "1",
    }
    grade = GradeResult.from_dict(record)
    assert (grade.score, grade.max_score) == (3.0, 5.0)
    assert grade.usage == {"input_tokens": 9}
    assert grade.confidence == 0.75 and grade.format_retries == 1
    bare = GradeResult.from_dict({"score": 1, "max_score": 2, "feedback": "f"})
    assert (bare.usage, bare.confidence, bare.format_retries) == ({}, None, 0)
    nulls = {"score": 1, "max_score": 2, "feedback": "f", "usage": None, "confidence": None}
    assert GradeResult.from_dict(nulls) == bare
