"""Typed helpers that read settings from the environment (12-factor).

Every secret can also come from a file: ``FOO_FILE=/run/secrets/foo`` wins over ``FOO``,
so production secrets never need to sit in the environment or the repository.
"""

import os
from pathlib import Path

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}


class EnvError(ValueError):
    """A variable is set to something the setting cannot use."""


def envstr(name: str, default: str = "") -> str:
    file_path = os.environ.get(f"{name}_FILE")
    if file_path:
        return Path(file_path).read_text().strip()
    return os.environ.get(name, default)


def envbool(name: str, default: bool) -> bool:
    raw = os.environ.get(name)
    if raw is None:
        return default
    value = raw.strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise EnvError(f"{name}={raw!r} is not a boolean (use one of 1/0, true/false, yes/no, on/off)")


def envint(name: str, default: int) -> int:
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        return int(raw)
    except ValueError:
        raise EnvError(f"{name}={raw!r} is not a whole number") from None


def envlist(name: str, default: list[str]) -> list[str]:
    raw = os.environ.get(name)
    if raw is None:
        return default
    return [item.strip() for item in raw.split(",") if item.strip()]
