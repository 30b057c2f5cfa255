"""Test tiers: the markers come from the fixtures a test uses (conftest.py), and
`./platter test --fast` runs the tier that needs no lab, worker or browser without starting
the lab."""

import conftest
from apps.lab import cli


class Item:
    """What the hook reads and writes of a collected test."""

    def __init__(self, *fixtures: str) -> None:
        self.fixturenames = list(fixtures)
        self.markers: list[str] = []

    def add_marker(self, marker: str) -> None:
        self.markers.append(marker)


def test_tests_are_marked_by_the_fixtures_they_use_even_through_other_fixtures():
    # pytest lists every fixture a test needs, the ones its fixtures ask for included:
    # `dispatching` brings `celery_worker_process`, a browser test's `page` brings `browser`.
    items = {
        "lab": Item("db", "lab_inventory"),
        "lab and worker": Item(
            "dispatching", "celery_worker_process", "lab_cleanup", "lab_inventory"
        ),
        "worker": Item("client", "dispatching", "celery_worker_process"),
        "browser": Item("page", "browser", "live_server"),
        "unit": Item("db", "alice", "client"),
    }
    conftest.pytest_collection_modifyitems(list(items.values()))
    assert {name: item.markers for name, item in items.items()} == {
        "lab": ["lab"],
        "lab and worker": ["lab", "worker"],
        "worker": ["worker"],
        "browser": ["browser"],
        "unit": [],
    }
    assert set(conftest.TIER_FIXTURES) == set(cli.TIERS)


def test_this_test_is_in_the_fast_tier(request):
    assert not {m.name for m in request.node.iter_markers()} & set(cli.TIERS)


def test_fast_runs_the_fast_tier_and_starts_no_lab(monkeypatch):
    ran, started = [], []

    class Done:
        returncode = 0

    def run(command, **kwargs):
        ran.append(command)
        return Done()

    monkeypatch.setattr(cli.subprocess, "run", run)
    monkeypatch.setattr(cli, "manage", lambda *args, **kwargs: 0)
    stack = cli.Stack()
    monkeypatch.setattr(stack, "services", lambda: started.append("services"))
    monkeypatch.setattr(stack, "lab", lambda: started.append("lab"))

    assert cli.test(stack, ["--fast", "-x"]) == 0

    assert started == ["services"]
    pytest_run = next(command for command in ran if "pytest" in command)
    assert pytest_run[pytest_run.index("pytest") + 1 :] == ["-m", cli.FAST_TIER, "-x"]
    assert any("mypy" in command for command in ran)  # ruff and mypy still run
    assert any("ruff" in command for command in ran)
