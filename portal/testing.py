"""What tests share beyond fixtures."""

import os
import zlib
from collections.abc import Sequence
from typing import TypeVar

T = TypeVar("T")

# Under `--fast`, each place of input gets this share of the hostile values (see `spread`).
FAST_SHARE = 3


def fast_budget() -> bool:
    """True in `./platter test --fast`, which sets PLATTER_TEST_BUDGET=fast (apps/lab/cli.py)
    to stay near its 3 minutes on 2 cores (issue 28); the whole check, CI and plain pytest runs
    keep the full budgets."""
    return os.environ.get("PLATTER_TEST_BUDGET") == "fast"


def examples(full: int, fast: int) -> int:
    """A property-based test's budget: `full` in the whole check, `fast` under `--fast`."""
    return fast if fast_budget() else full


def spread(values: Sequence[T], place: str) -> list[T]:
    """The values a test sends to one place of input (a field, a parameter): every one in the
    whole check; under `--fast`, every FAST_SHARE-th, starting at an offset taken from the
    place's name, so that across places each value is still sent somewhere."""
    if not fast_budget():
        return list(values)
    offset = zlib.crc32(place.encode()) % FAST_SHARE
    return [value for i, value in enumerate(values) if i % FAST_SHARE == offset]
