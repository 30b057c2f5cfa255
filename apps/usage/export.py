"""Usage as a CSV download with fixed columns (services.CSV_COLUMNS), for the API and the page."""

import csv
import io
from collections.abc import Iterable
from typing import Any

from django.http import HttpResponse
from django.utils.http import content_disposition_header

from .services import CSV_COLUMNS, FIGURES, Row

MAX_DAYS = 366  # the longest range one request reads
TEXT_COLUMNS = ("user", "group", "cluster", "product", "state")


def _cell(value: str) -> str:
    # A user-chosen name starting like a formula must stay text in a spreadsheet.
    return "'" + value if value[:1] in ("=", "+", "-", "@") else value


def records(rows: Iterable[Row]) -> list[dict[str, Any]]:
    """One dict a line, keyed by CSV_COLUMNS: the figures as numbers, the date as ISO text."""
    return [
        {
            "date": r.date.isoformat(),
            **{c: getattr(r, c) for c in TEXT_COLUMNS},
            **{f: getattr(r, f) for f in FIGURES},
        }
        for r in rows
    ]


def csv_text(lines: Iterable[dict[str, Any]]) -> str:
    """The CSV of records(): a header line, then one line each."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(CSV_COLUMNS)
    for line in lines:
        text = [_cell(str(line[c])) for c in TEXT_COLUMNS]
        writer.writerow([line["date"], *text, *(f"{line[f]:.6f}" for f in FIGURES)])
    return out.getvalue()


def csv_response(rows: Iterable[Row], filename: str) -> HttpResponse:
    response = HttpResponse(csv_text(records(rows)), content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = content_disposition_header(True, filename)
    return response
