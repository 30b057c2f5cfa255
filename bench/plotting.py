"""matplotlib for the benches' plots. It is an extra of its own (`pip install -e '.[bench]'`), so
the portal, its image and its test suite never need it; a bench checks for it before it starts
measuring, not after minutes of work."""

import os
from pathlib import Path
from types import ModuleType

INSTALL = ".venv/bin/python -m pip install -e '.[bench]'"


def require() -> None:
    """Stop at once, naming the command that installs it, when matplotlib is missing."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise SystemExit(f"the benches draw their plots with matplotlib: {INSTALL}") from None


def out_dir() -> Path:
    """Where a bench writes its plots and logs: bench/out/, or PLATTER_BENCH_OUT (a smoke run's
    own folder, so it never overwrites a real run's plots)."""
    path = Path(os.environ.get("PLATTER_BENCH_OUT") or Path(__file__).resolve().parent / "out")
    path.mkdir(parents=True, exist_ok=True)
    return path


def pyplot() -> ModuleType:
    """matplotlib.pyplot drawing to files (no display)."""
    require()
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt
