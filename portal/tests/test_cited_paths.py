"""Every repository path a comment or a doc cites exists: a module moved or renamed takes its
citations along. Scans the tracked Python, Markdown, TOML, YAML, HTML and shell files for
paths under the repository's top folders that name a file (with an extension) or a folder
(with a trailing slash). Placeholders and globs (`apps/<app>/`, `deploy/images/*/`) are
skipped, and so are paths git ignores (what benches and builds write). A module's attribute
(`workers/operations.OPERATIONS`) counts when the module defines it."""

import re
import subprocess
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

FOLDERS = (
    "apps",
    "workers",
    "portal",
    "bench",
    "templates",
    "static",
    "fixtures",
    "deploy",
    "requirements",
    "platter_cli",
    ".ci",
)
SUFFIXES = (".py", ".md", ".toml", ".yaml", ".yml", ".html", ".sh")
# A path starts a token (not inside a longer path or a URL) and runs until a space, a quote,
# a bracket or punctuation that ends a sentence or a code span.
CITED = re.compile(
    r"(?<![\w./\\-])((?:" + "|".join(map(re.escape, FOLDERS)) + r")/[^\s`'\"()\[\]<>,;:|]*)"
)
# Globs, placeholders and shell or format variables stand for many paths, not one.
PLACEHOLDERS = ("<", "*", "{", "...", "$", "%")
SHELL = re.compile(rb"^#!.*\b(ba|da|z)?sh\b")


def tracked_texts() -> list[str]:
    tracked = subprocess.run(
        ["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.splitlines()
    return [path for path in tracked if (ROOT / path).is_file() and _is_text(path)]


def _is_text(path: str) -> bool:
    if path.endswith(SUFFIXES):
        return True
    with (ROOT / path).open("rb") as file:
        return bool(SHELL.match(file.readline()))


def citations(text: str) -> Iterator[tuple[int, str]]:
    """(line number, path) for each path the text cites."""
    for number, line in enumerate(text.splitlines(), 1):
        for match in CITED.finditer(line):
            path = match.group(1).rstrip(".")  # a sentence's full stop
            following = line[match.end() : match.end() + 1]
            if any(mark in path + following for mark in PLACEHOLDERS):
                continue
            if path.endswith("/") or re.search(r"\.\w+$", path.rsplit("/", 1)[-1]):
                yield number, path


def exists(path: str) -> bool:
    if (ROOT / path).exists():
        return True
    folder, _, name = path.rpartition("/")
    module, _, attribute = name.partition(".")
    source = ROOT / folder / f"{module}.py"
    if not attribute.isidentifier() or not source.is_file():
        return False
    defined = rf"^(?:(?:async\s+)?def|class)\s+{attribute}\b|^{attribute}\s*[:=]"
    return re.search(defined, source.read_text(), re.MULTILINE) is not None


def ignored(paths: set[str]) -> set[str]:
    """The paths git ignores: outputs, not sources."""
    if not paths:
        return set()
    result = subprocess.run(
        ["git", "check-ignore", "--no-index", "--stdin"],
        cwd=ROOT,
        input="\n".join(sorted(paths)),
        capture_output=True,
        text=True,
        check=False,
    )
    return set(result.stdout.splitlines())


def test_the_pattern_finds_citations_and_skips_placeholders():
    text = (
        "see `portal/urls.py`, apps/api/ and portal/celery.app.\n"
        "not apps/<app>/x.py, deploy/images/*/ nor /opt/platter/bin/x.sh or apps/web"
    )
    assert list(citations(text)) == [
        (1, "portal/urls.py"),
        (1, "apps/api/"),
        (1, "portal/celery.app"),
    ]
    assert exists("portal/celery.app")
    assert not exists("portal/" + "celery.no_such_name")  # (split: this file is scanned too)
    assert not exists("portal/" + "no_such_module.py")
    assert ignored({"bench/out/" + "x.png", "portal/urls.py"}) == {"bench/out/x.png"}


def test_every_cited_path_exists():
    missing = {
        (source, number, path)
        for source in tracked_texts()
        for number, path in citations((ROOT / source).read_text(errors="replace"))
        if not exists(path)
    }
    outputs = ignored({path for _source, _number, path in missing})
    stale = sorted(
        f"{source}:{number}: {path}" for source, number, path in missing if path not in outputs
    )
    assert stale == [], "cited paths that do not exist:\n" + "\n".join(stale)
