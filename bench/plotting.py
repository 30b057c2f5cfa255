"""matplotlib for the benches' plots. It is an extra of its own (`pip install -e '.[bench]'`), so
the portal, its image and its test suite never need it; a bench checks for it before it starts
measuring, not after minutes of work."""

from types import ModuleType

INSTALL = ".venv/bin/python -m pip install -e '.[bench]'"


def require() -> None:
    """Stop at once, naming the command that installs it, when matplotlib is missing."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise SystemExit(f"the benches draw their plots with matplotlib: {INSTALL}") from None


def pyplot() -> ModuleType:
    """matplotlib.pyplot drawing to files (no display)."""
    require()
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt
