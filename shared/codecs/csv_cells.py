"""CSV lines a spreadsheet opens as text: no cell is read as a formula (CSV injection).

A spreadsheet evaluates a cell that starts with `=`, `+`, `-` or `@` as a formula, and
a leading tab or carriage return can hide such a start; `=HYPERLINK(...)` or
`=IMPORTXML(...)` in a model's feedback or a submission id could send the sheet's data
elsewhere when a teacher opens it. Following OWASP, such a text cell is written with a
leading `'`, which spreadsheets show as text and do not evaluate.

A deliberate exception: an `int` or `float` value (a score, a version) is written as a
number, a negative one too, so a spreadsheet can still sum it. Python writes a number as
digits, a sign, a point or an exponent, never as a formula; only text can carry one. Every
other value is written as its text and neutralised.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable

#: The first characters that make a spreadsheet read a cell as a formula (OWASP).
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def safe_cell(value: object) -> object:
    """The value to write in a cell: text that starts like a formula gets a leading `'`."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        return value
    text = "" if value is None else str(value)
    return "'" + text if text.startswith(FORMULA_STARTS) else text


def csv_line(values: Iterable[object]) -> str:
    """One CSV line (CRLF-terminated, as `csv` writes it) of neutralised cells."""
    buffer = io.StringIO()
    csv.writer(buffer).writerow([safe_cell(v) for v in values])
    return buffer.getvalue()
