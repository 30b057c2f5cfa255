"""What tests share beyond fixtures."""

import os


def examples(full: int, fast: int) -> int:
    """A property-based test's budget: `full` in the whole check (`./platter test`, CI) and in
    plain pytest runs; `fast` in `./platter test --fast`, which sets PLATTER_TEST_BUDGET=fast
    (apps/lab/cli.py) to stay within its 3 minutes on 2 cores (issue 28)."""
    return fast if os.environ.get("PLATTER_TEST_BUDGET") == "fast" else full
