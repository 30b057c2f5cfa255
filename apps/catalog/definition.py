"""A ProductVersion's definition checked for Django: every problem of apps.catalog.spec's
parser, keyed by the model field it lives in (so the admin shows it next to that field), each
message naming its path, e.g. ``roles[1].cores: needs min <= default <= max, ...``."""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ValidationError

from .spec import DEFINITION_FIELDS, DefinitionError, ProductDefinition, parse_definition


def definition_fields(version: Any) -> dict[str, Any]:
    """The fields a definition is made of, read from a ProductVersion (or anything with them)."""
    return {name: getattr(version, name) for name in DEFINITION_FIELDS}


def validate_definition(version: Any) -> ProductDefinition:
    """The parsed definition, or django's ValidationError keyed by model field."""
    try:
        return parse_definition(definition_fields(version))
    except DefinitionError as exc:
        raise ValidationError(exc.by_field()) from exc
