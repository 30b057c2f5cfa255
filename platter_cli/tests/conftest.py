"""The installed `platter` console script, run as a user runs it (a subprocess with a clean
environment and a config home of its own) against the live test server."""

import json
import os
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from apps.api.tests.conftest import throttle_cache, token_for  # noqa: F401 (fixtures)
from apps.catalog.services import load_catalog

PLATTER = Path(sys.executable).parent / "platter"  # what `pip install` put next to python


@dataclass
class Ran:
    returncode: int
    stdout: str
    stderr: str

    def json(self):
        return json.loads(self.stdout)

    def __str__(self) -> str:  # in assertion messages
        return f"exit {self.returncode}\nstdout:\n{self.stdout}\nstderr:\n{self.stderr}"


def user_environment(home: Path, **extra: str) -> dict[str, str]:
    """What a user's shell would have: no Django settings, no PLATTER_* of the test run."""
    return {
        "PATH": os.environ["PATH"],
        "HOME": str(home),
        "LANG": "C.UTF-8",
        "XDG_CONFIG_HOME": str(home / ".config"),
        "COLUMNS": "200",
        **extra,
    }


@pytest.fixture
def home(tmp_path) -> Path:
    return tmp_path


@pytest.fixture
def platter(home) -> Callable[..., Ran]:
    """platter("ls", "--json", env={...}, input="...") -> Ran."""
    if not PLATTER.exists():
        pytest.fail(f"{PLATTER} is missing: .venv/bin/pip install -e '.[dev]' installs it")

    def run(
        *args: str, env: dict[str, str] | None = None, input: str | None = None, timeout: float = 60
    ) -> Ran:
        done = subprocess.run(
            [str(PLATTER), *args],
            env=user_environment(home, **(env or {})),
            input=input,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        assert "Traceback" not in done.stderr, done.stderr  # errors are messages, never these
        return Ran(done.returncode, done.stdout, done.stderr)

    return run


@pytest.fixture
def catalog_loaded(transactional_db):
    load_catalog()


@pytest.fixture
def logged_in(platter, live_server, alice, catalog_loaded) -> Callable[..., Ran]:
    """`platter` after `platter login` as alice."""
    ran = platter("login", "--url", live_server.url, "--token", "-", input=token_for(alice))
    assert ran.returncode == 0, ran
    return platter
