"""The API's JSON parser: JSON nested deeper than Python's recursion limit is a 400 like any
other malformed body (DRF's parser lets RecursionError through as a server error)."""

from rest_framework import parsers
from rest_framework.exceptions import ParseError


class JSONParser(parsers.JSONParser):
    def parse(self, stream, media_type=None, parser_context=None):
        try:
            return super().parse(stream, media_type, parser_context)
        except RecursionError:
            raise ParseError("JSON parse error - nested too deeply") from None
