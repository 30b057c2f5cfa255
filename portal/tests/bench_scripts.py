"""The benches are the modules of the `bench` package (bench/README.md); their tests import
them by name."""

import importlib
from types import ModuleType


def load_bench(name: str) -> ModuleType:
    """bench/<name>.py as the module bench.<name>."""
    return importlib.import_module(f"bench.{name}")
