"""Log lines that say which request and which cluster they are about.

ContextFilter copies the ids bound in portal.context onto every record; the plain formatter
(development) appends them, the JSON formatter (production, PLATTER_LOG_FORMAT=json) writes
one JSON object per line with them as fields. See LOGGING in portal/settings/base.py.
"""

import logging

from django.http import HttpRequest
from pythonjsonlogger.core import RESERVED_ATTRS
from pythonjsonlogger.json import JsonFormatter as _JsonFormatter

from portal import context


class ContextFilter(logging.Filter):
    """Adds request_id, cluster_id and client_address to a record when they are set."""

    def filter(self, record: logging.LogRecord) -> bool:
        for name, variable in context.VARIABLES.items():
            value = variable.get()
            if value is not None and not hasattr(record, name):
                setattr(record, name, value)
        # Django logs a 4xx/5xx answer after the middleware returned (and the context with
        # it), passing the request along: its id and address are on the request itself.
        request = getattr(record, "request", None)
        if isinstance(request, HttpRequest) and hasattr(request, "id"):
            if not hasattr(record, "request_id"):
                record.request_id = request.id
            if not hasattr(record, "client_address"):
                record.client_address = context.address_of(request)
        return True


class PlainFormatter(logging.Formatter):
    """The usual line, then [request_id=… cluster_id=…] when there are any."""

    def formatMessage(self, record: logging.LogRecord) -> str:
        line = super().formatMessage(record)
        ids = " ".join(
            f"{name}={getattr(record, name)}"
            for name in ("request_id", "cluster_id")
            if hasattr(record, name)
        )
        return f"{line} [{ids}]" if ids else line


class JsonFormatter(_JsonFormatter):
    """One JSON object per line: time, level, logger, message, the context ids, any other
    `extra` fields, and exc_info with the traceback."""

    def __init__(self) -> None:
        super().__init__(
            "%(levelname)s %(name)s %(message)s",
            rename_fields={"levelname": "level", "name": "logger"},
            timestamp="time",
            # Django's request logging passes the request itself as an extra: its text
            # holds the query string, which may carry something secret. Status code stays.
            reserved_attrs=[*RESERVED_ATTRS, "request"],
        )
