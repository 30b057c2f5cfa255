"""The install split: `./platter run` installs what the portal and the lab need before it
answers, its background `./platter lab images` adds the product images' tools, and only the
test command adds the tools tests alone use (a browser, a directory server), so a newcomer's
first run waits for none of them. Read from the script itself (`./platter packages ...`)."""

import subprocess
from pathlib import Path

BASE_DIR = Path(__file__).resolve().parents[3]
TEST_ONLY = {"chromium", "slapd", "ldap-utils"}
IMAGES_ONLY = {"mmdebstrap", "maven", "docker-registry"}
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


def test_the_run_command_installs_neither_test_nor_image_tools_and_the_others_add_them():
    run, images, test = packages("run"), packages("images"), packages("test")
    assert not (TEST_ONLY | IMAGES_ONLY) & set(run)
    assert set(images) == set(run) | IMAGES_ONLY
    assert set(test) == set(run) | IMAGES_ONLY | TEST_ONLY
    assert {"postgresql", "redis-server", "docker.io", "nftables"} <= set(run)


def test_the_run_command_prepares_the_images_through_the_script_that_installs_their_tools():
    cli = (BASE_DIR / "apps" / "lab" / "cli.py").read_text()
    assert '[str(BASE_DIR / "platter"), "lab", "images"]' in cli


def test_no_code_but_the_tests_uses_a_test_only_tool():
    users = sorted(
        str(path.relative_to(BASE_DIR))
        for folder in RUNTIME_FOLDERS
        for path in (BASE_DIR / folder).rglob("*.py")
        if "tests" not in path.parts
        and any(tool in path.read_text() for tool in ("chromium", "slapd", "ldapadd"))
    )
    assert users == []
