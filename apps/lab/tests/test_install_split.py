"""The install split: `./platter run` installs what running needs, and only the test command
adds the tools tests alone use (a browser, a directory server), so a newcomer's first run does
not wait for them. Read from the script itself (`./platter packages run|test`)."""

import subprocess
from pathlib import Path

BASE_DIR = Path(__file__).resolve().parents[3]
TEST_ONLY = {"chromium", "slapd", "ldap-utils"}
RUNTIME_FOLDERS = ("apps", "workers", "portal", "platter_cli", "bench")


def packages(command: str) -> list[str]:
    done = subprocess.run(
        [str(BASE_DIR / "platter"), "packages", command],
        capture_output=True,
        text=True,
        check=True,
        timeout=30,
    )
    return done.stdout.split()


def test_the_run_command_installs_no_test_only_package_and_the_test_command_adds_them():
    run, test = packages("run"), packages("test")
    assert not TEST_ONLY & set(run)
    assert set(test) == set(run) | TEST_ONLY
    assert {"postgresql", "redis-server", "docker.io", "nftables", "maven"} <= set(run)


def test_no_code_but_the_tests_uses_a_test_only_tool():
    users = sorted(
        str(path.relative_to(BASE_DIR))
        for folder in RUNTIME_FOLDERS
        for path in (BASE_DIR / folder).rglob("*.py")
        if "tests" not in path.parts
        and any(tool in path.read_text() for tool in ("chromium", "slapd", "ldapadd"))
    )
    assert users == []
