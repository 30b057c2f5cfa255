"""Usage as a CSV download with fixed columns (services.CSV_COLUMNS), for the API and the page."""

import csv
import io
from collections.abc import Iterable

from django.http import HttpResponse

from .services import CSV_COLUMNS, FIGURES, Row

MAX_DAYS = 366  # the longest range one request reads


def _cell(value: str) -> str:
    # A user-chosen name starting like a formula must stay text in a spreadsheet.
    return "'" + value if value[:1] in ("=", "+", "-", "@") else value


def csv_response(rows: Iterable[Row], filename: str) -> HttpResponse:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(CSV_COLUMNS)
    for r in rows:
        text = [_cell(v) for v in (r.user, r.group, r.cluster, r.product, r.state)]
        writer.writerow([r.date.isoformat(), *text, *(f"{getattr(r, f):.6f}" for f in FIGURES)])
    response = HttpResponse(out.getvalue(), content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="{filename}"'
    return response
