"""requirements/dev.lock: every package `./platter` installs into .venv, pinned with its hashes.

    ./platter lock [pip-compile options]   regenerate it from pyproject.toml's dependencies and
                                           its dev extra (e.g. --upgrade, --upgrade-package X)
    python3 requirements/lock.py check     exit 1, saying what to do, when pyproject.toml's
                                           dependencies changed since the lock was made

The lock's first line holds a digest of those dependency lists, so a dependency added to
pyproject.toml without regenerating the lock is caught (not a file date: a fresh clone has
none worth comparing). Runs on the standard library alone; `update` needs pip-tools.
"""

import hashlib
import json
import os
import subprocess
import sys
import tomllib
from pathlib import Path

BASE_DIR = Path(__file__).resolve().parent.parent
PYPROJECT = BASE_DIR / "pyproject.toml"
LOCK = BASE_DIR / "requirements" / "dev.lock"
EXTRA = "dev"
MARK = "# pyproject.toml dependencies digest: "


def dependencies_digest(pyproject: Path = PYPROJECT) -> str:
    """A digest of what the lock is made from: requires-python, the dependencies and the extra
    (order and the rest of pyproject.toml, such as tool settings, do not count)."""
    project = tomllib.loads(pyproject.read_text())["project"]
    made_from = {
        "requires-python": project.get("requires-python", ""),
        "dependencies": sorted(project.get("dependencies", [])),
        EXTRA: sorted(project.get("optional-dependencies", {}).get(EXTRA, [])),
    }
    return hashlib.sha256(json.dumps(made_from, sort_keys=True).encode()).hexdigest()[:16]


def lock_digest(lock: Path = LOCK) -> str | None:
    if not lock.exists():
        return None
    first = lock.read_text().splitlines()[:1]
    return first[0].removeprefix(MARK) if first and first[0].startswith(MARK) else None


def check() -> int:
    if lock_digest() == dependencies_digest():
        return 0
    what = "is missing" if not LOCK.exists() else "is older than pyproject.toml's dependencies"
    print(
        f"{LOCK.relative_to(BASE_DIR)} {what}: regenerate it with `./platter lock` "
        "and commit it with pyproject.toml",
        file=sys.stderr,
    )
    return 1


def update(options: list[str]) -> int:
    """pip-compile, keeping the current pins that still fit (unless --upgrade), then the mark."""
    command = [
        sys.executable,
        "-m",
        "piptools",
        "compile",
        "--quiet",
        "--extra",
        EXTRA,
        "--generate-hashes",
        "--allow-unsafe",
        "--strip-extras",
        "--no-emit-find-links",
        "--no-emit-index-url",
        "--no-emit-trusted-host",
        "-o",
        str(LOCK),
        *options,
        str(PYPROJECT),
    ]
    env = {**os.environ, "CUSTOM_COMPILE_COMMAND": "./platter lock"}
    before = LOCK.read_text() if LOCK.exists() else None
    if before is not None and lock_digest() is not None:  # pip-compile reads the old pins back
        LOCK.write_text(before.split("\n", 1)[1])
    code = subprocess.run(command, cwd=BASE_DIR, env=env).returncode
    if code != 0:
        if before is not None:
            LOCK.write_text(before)  # as it was: a failed run changes nothing
        return code
    LOCK.write_text(f"{MARK}{dependencies_digest()}\n{LOCK.read_text()}")
    print(f"wrote {LOCK.relative_to(BASE_DIR)}")
    return 0


def main(argv: list[str]) -> int:
    if argv[:1] == ["check"]:
        return check()
    if argv[:1] == ["update"]:
        return update(argv[1:])
    usage = "usage: python3 requirements/lock.py check | update [pip-compile options]"
    print(usage, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
