"""The developer tooling: the lock file `./platter` installs from, and the benches' extra."""

import re
import shutil
import subprocess
import sys
import textwrap
import tomllib
from pathlib import Path

import pytest

BASE_DIR = Path(__file__).resolve().parents[2]
LOCK = BASE_DIR / "requirements" / "dev.lock"


def check_lock(root: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(root / "requirements" / "lock.py"), "check"],
        capture_output=True,
        text=True,
        check=False,
    )


@pytest.fixture
def checkout(tmp_path: Path) -> Path:
    """pyproject.toml and requirements/ as committed, in a folder of their own."""
    (tmp_path / "requirements").mkdir()
    for name in ("requirements/lock.py", "requirements/dev.lock", "pyproject.toml"):
        shutil.copy(BASE_DIR / name, tmp_path / name)
    return tmp_path


def test_the_committed_lock_is_made_from_the_declared_dependencies():
    result = check_lock(BASE_DIR)
    assert result.returncode == 0, result.stderr


def test_a_dependency_added_without_a_new_lock_is_refused_by_name(checkout: Path):
    pyproject = checkout / "pyproject.toml"
    text = pyproject.read_text()
    pyproject.write_text(
        text.replace("dependencies = [\n", 'dependencies = [\n    "humanize",\n', 1)
    )
    result = check_lock(checkout)
    assert result.returncode == 1
    assert "requirements/dev.lock is older than pyproject.toml's dependencies" in result.stderr
    assert "./platter lock" in result.stderr


def test_a_change_outside_the_dependencies_keeps_the_lock(checkout: Path):
    pyproject = checkout / "pyproject.toml"
    pyproject.write_text(pyproject.read_text().replace("line-length = 100", "line-length = 99"))
    assert check_lock(checkout).returncode == 0


def test_every_locked_package_is_pinned_with_hashes_and_the_bench_extra_is_not_locked():
    pinned_with_hashes = r"^([A-Za-z0-9_.\-]+)==\S+((?: \\\n    --hash=sha256:[0-9a-f]{64})+)"
    entries = re.findall(pinned_with_hashes, LOCK.read_text(), re.MULTILINE)
    pinned = {name.lower() for name, _ in entries}
    requirement_lines = [line for line in LOCK.read_text().splitlines() if "==" in line]
    assert len(pinned) == len(requirement_lines), "a package without its hashes"
    project = tomllib.loads((BASE_DIR / "pyproject.toml").read_text())["project"]
    for requirement in project["dependencies"] + project["optional-dependencies"]["dev"]:
        name = re.split(r"[\[<>=!~ ]", requirement, maxsplit=1)[0].lower().replace("_", "-")
        assert name in pinned, f"{name} is declared but not locked"
    assert "matplotlib" not in pinned


def test_the_benches_load_without_matplotlib_and_say_how_to_get_it():
    """The test suite imports the benches (their pure parts): none may need the bench extra."""
    probe = textwrap.dedent(
        f"""
        import importlib, pkgutil, sys
        sys.modules["matplotlib"] = None  # as if the bench extra were not installed
        sys.path.insert(0, {str(BASE_DIR)!r})
        import django, os
        os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings.test")
        django.setup()
        import bench
        for module in pkgutil.iter_modules(bench.__path__):
            importlib.import_module(f"bench.{{module.name}}")
        from bench import plotting
        plotting.require()
        """
    )
    result = subprocess.run(
        [sys.executable, "-c", probe], cwd=BASE_DIR, capture_output=True, text=True, check=False
    )
    assert result.returncode == 1, result.stdout + result.stderr
    assert "pip install -e '.[bench]'" in result.stderr, result.stderr


def test_a_new_venv_gets_the_pinned_pip_before_the_lock():
    """venv's own pip (23.x) fails the hash-checked install of the lock whenever PyPI has a
    newer release of a package pinned with an extra elsewhere (coverage[toml]): ./platter
    installs requirements/pip.lock first, and only a pip from 23.3 on is pinned there."""
    pinned = re.findall(r"^pip==(\d+)\.(\d+)", (LOCK.parent / "pip.lock").read_text(), re.M)
    assert len(pinned) == 1 and tuple(map(int, pinned[0])) >= (23, 3)
    assert "--hash=sha256:" in (LOCK.parent / "pip.lock").read_text()
    script = (BASE_DIR / "platter").read_text()
    assert 0 < script.index("-r requirements/pip.lock") < script.index("-r requirements/dev.lock")
