"""The problems of a product definition (apps.catalog.spec), each named by its path, and
pydantic's errors worded as such problems."""

from __future__ import annotations

import types
import typing
from dataclasses import dataclass
from typing import Annotated, Any

from pydantic import BaseModel
from pydantic import ValidationError as PydanticValidationError

Path = tuple[str | int, ...]
# How pydantic names the members of a union of JSON scalars in an error's location.
SCALAR_MEMBERS = {
    "int": "int_type",
    "float": "float_type",
    "str": "string_type",
    "bool": "bool_type",
}


@dataclass(frozen=True)
class Problem:
    path: Path  # starts with the ProductVersion field, e.g. ("roles", 1, "cores", "max")
    message: str

    def __str__(self) -> str:
        where = format_path(self.path)
        return f"{where}: {self.message}" if where else self.message


class DefinitionError(ValueError):
    """Every problem of a definition; ``by_field()`` groups them per ProductVersion field."""

    def __init__(self, problems: list[Problem]):
        self.problems = list(problems)
        super().__init__("; ".join(map(str, self.problems)))

    def by_field(self) -> dict[str, list[str]]:
        grouped: dict[str, list[str]] = {}
        for problem in self.problems:
            grouped.setdefault(str(problem.path[0]), []).append(str(problem))
        return grouped


def format_path(path: Path) -> str:
    """("roles", 1, "cores", "max") -> "roles[1].cores.max"."""
    text = ""
    for part in path:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text


def from_pydantic(section: str, parsed_as: Any, exc: PydanticValidationError) -> list[Problem]:
    """Pydantic's errors for one field of the definition (parsed as ``parsed_as``) as Problems
    worded for admins."""
    found = []
    for error in exc.errors():
        loc = tuple(p for p in error["loc"] if p != "[key]")
        scalar = len(loc) > 1 and SCALAR_MEMBERS.get(str(loc[-1])) == error["type"]
        if scalar:  # a union of scalars names the member tried: one problem, not four
            loc = loc[:-1]
        path = (section, *loc)
        kind, given = error["type"], error.get("input")
        ctx = error.get("ctx") or {}
        if kind == "extra_forbidden":
            allowed = _keys_at(parsed_as, loc[:-1])
            known = f" (allowed: {', '.join(allowed)})" if allowed else ""
            found.append(Problem(path[:-1], f"unknown key {loc[-1]!r}{known}"))
            continue
        messages = {
            "missing": "required",
            "int_type": f"must be an integer, got {brief(given)}",
            "bool_type": "must be true or false",
            "string_type": f"must be a string, got {brief(given)}",
            "list_type": f"must be a list, got {brief(given)}",
            "dict_type": "must be an object",
            "model_type": "must be an object",
            "literal_error": f"must be one of {ctx.get('expected')}, got {brief(given)}",
            "greater_than_equal": f"must be at least {ctx.get('ge')}, got {brief(given)}",
            "less_than_equal": f"must be at most {ctx.get('le')}, got {brief(given)}",
            "too_short": "must not be empty",
            "string_too_short": "must not be empty",
            "definition": ctx.get("problem", error["msg"]),
        }
        if scalar and kind.endswith("_type"):
            kind = "scalar_type"
            messages[kind] = f"must be a number, a string or true/false, got {brief(given)}"
        found.append(Problem(path, messages.get(kind, error["msg"])))
    # A union reports each member's failure at the same place: keep the first of each path.
    unique: dict[Path, Problem] = {}
    for problem in found:
        unique.setdefault(problem.path, problem)
    return list(unique.values())


def _keys_at(kind: Any, loc: tuple) -> list[str]:
    """The keys a model nested at ``loc`` under ``kind`` allows (for unknown-key messages)."""
    for part in loc:
        kind = _unwrap(kind)
        if isinstance(kind, type) and issubclass(kind, BaseModel):
            info = kind.model_fields.get(str(part))
            if info is None:
                return []
            kind = info.annotation
        elif typing.get_origin(kind) in (list, dict):
            kind = typing.get_args(kind)[-1]
        else:
            return []
    kind = _unwrap(kind)
    if isinstance(kind, type) and issubclass(kind, BaseModel):
        return sorted(kind.model_fields)
    return []


def _unwrap(kind: Any) -> Any:
    """X | None -> X; Annotated[X, ...] -> X."""
    if typing.get_origin(kind) is Annotated:
        kind = typing.get_args(kind)[0]
    if isinstance(kind, types.UnionType) or typing.get_origin(kind) is typing.Union:
        members = [a for a in typing.get_args(kind) if a is not type(None)]
        kind = members[0] if len(members) == 1 else kind
    return kind


def brief(value: Any) -> str:
    """A value as an error message quotes it: a 5,000-digit number is not echoed whole."""
    shown = repr(value)
    return shown if len(shown) <= 40 else shown[:37] + "..."
