"""Test tiers: the markers come from the fixtures a test uses (conftest.py), and
`./platter test --fast` runs the tier that needs no lab, worker or browser without starting
the lab."""

import itertools
import subprocess
import sys
import time
from pathlib import Path

import conftest
from apps.lab import cli
from portal import testing


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


class Recorder:
    """cli.test with the commands it would run recorded instead of run, each passing."""

    def __init__(self, monkeypatch) -> None:
        self.ran: list[list[str]] = []
        self.envs: list[dict] = []  # pytest's
        self.started: list[str] = []

        class Done:
            returncode = 0

        def run(command, **kwargs):
            self.ran.append(command)
            if "pytest" in command:
                self.envs.append(kwargs["env"])
            return Done()

        monkeypatch.setattr(cli.subprocess, "run", run)
        monkeypatch.setattr(cli, "manage", lambda *args, **kwargs: 0)
        self.stack = cli.Stack()
        monkeypatch.setattr(self.stack, "services", lambda: self.started.append("services"))
        monkeypatch.setattr(self.stack, "lab", lambda: self.started.append("lab"))
        monkeypatch.setattr(cli, "lab_is_up", lambda: False)

        def stage_images() -> str:
            self.started.append("staging")
            return "the staging child"

        monkeypatch.setattr(self.stack, "stage_images", stage_images)
        monkeypatch.setattr(cli, "staged_images", lambda child: self.started.append("staged"))

    def pytest_runs(self) -> list[list[str]]:
        return [c[c.index("pytest") + 1 :] for c in self.ran if "pytest" in c]


def test_fast_runs_the_fast_tier_on_several_processes_and_starts_no_lab(monkeypatch):
    monkeypatch.setenv("PLATTER_TEST_PROCESSES", "3")
    monkeypatch.setattr(cli.devservers, "redis_databases", lambda: 64)
    check = Recorder(monkeypatch)

    assert cli.test(check.stack, ["--fast", "-x"]) == 0

    assert check.started == ["services"]
    assert check.pytest_runs() == [["-m", cli.FAST_TIER, "-n", "3", "--dist", "loadfile", "-x"]]
    assert any("mypy" in command for command in check.ran)  # ruff and mypy still run
    assert any("ruff" in command for command in check.ran)


def test_the_whole_check_runs_the_fast_tier_then_the_others_on_the_lab(monkeypatch):
    monkeypatch.setattr(cli.devservers, "redis_databases", lambda: 64)
    check = Recorder(monkeypatch)

    assert cli.test(check.stack, []) == 0

    # The images' sources are fetched beside ruff, mypy and the fast tier, and are all there
    # before the lab comes up.
    assert check.started == ["staging", "services", "staged", "lab"]
    fast, slow = check.pytest_runs()
    assert fast[:2] == ["-m", cli.FAST_TIER] and "-n" in fast
    assert slow[:2] == ["-m", cli.SLOW_TIERS] and "-n" not in slow
    # Every test, whatever its markers, is in exactly one of the two runs (a marker expression
    # is a Python boolean expression of the marker names).
    for marks in itertools.product([False, True], repeat=len(cli.TIERS)):
        names = dict(zip(cli.TIERS, marks, strict=True))
        assert eval(cli.FAST_TIER, {}, names) != eval(cli.SLOW_TIERS, {}, names)  # noqa: S307


def test_a_redis_with_too_few_databases_runs_the_fast_tier_in_one_process(monkeypatch):
    monkeypatch.setenv("PLATTER_TEST_PROCESSES", "4")
    monkeypatch.setattr(cli.devservers, "redis_databases", lambda: 16)
    check = Recorder(monkeypatch)

    assert cli.test(check.stack, ["--fast"]) == 0

    assert check.pytest_runs() == [["-m", cli.FAST_TIER, "-n", "0", "--dist", "loadfile"]]


def test_a_failing_fast_tier_ends_the_check_before_the_lab(monkeypatch):
    monkeypatch.setattr(cli.devservers, "redis_databases", lambda: 64)
    check = Recorder(monkeypatch)
    runs = []  # every command passes but pytest

    class Result:
        def __init__(self, code):
            self.returncode = code

    def run(command, **kwargs):
        runs.append(command)
        return Result(1 if "pytest" in command else 0)

    monkeypatch.setattr(cli.subprocess, "run", run)

    assert cli.test(check.stack, []) == 1

    assert check.started == ["staging", "services"]  # the staging is stopped by stack.close
    assert sum("pytest" in command for command in runs) == 1


def test_arguments_run_once_on_the_lab(monkeypatch):
    check = Recorder(monkeypatch)

    assert cli.test(check.stack, ["-k", "lab", "-x"]) == 0

    assert check.started == ["services", "lab"]  # no staging beside it: there is no fast tier
    assert check.pytest_runs() == [["-k", "lab", "-x"]]


def test_only_the_fast_tier_alone_runs_the_smaller_fuzzing_budget(monkeypatch):
    monkeypatch.setattr(cli.devservers, "redis_databases", lambda: 64)
    fast = Recorder(monkeypatch)
    assert cli.test(fast.stack, ["--fast"]) == 0
    whole = Recorder(monkeypatch)
    assert cli.test(whole.stack, []) == 0

    assert [env["PLATTER_TEST_BUDGET"] for env in fast.envs] == ["fast"]
    # The whole check's fast tier keeps the full budget, as its lab tiers do.
    assert [env["PLATTER_TEST_BUDGET"] for env in whole.envs] == ["full", "full"]


def test_the_budget_follows_the_environment(monkeypatch):
    monkeypatch.setenv("PLATTER_TEST_BUDGET", "fast")
    assert testing.examples(full=30, fast=8) == 8
    monkeypatch.setenv("PLATTER_TEST_BUDGET", "full")
    assert testing.examples(full=30, fast=8) == 30
    monkeypatch.delenv("PLATTER_TEST_BUDGET")  # plain pytest: the full budget
    assert testing.examples(full=30, fast=8) == 30


def test_under_fast_each_place_gets_a_share_of_the_values_and_every_value_a_place(monkeypatch):
    values = list(range(30))
    places = [f"post /api/v1/clusters field{n}" for n in range(12)]
    monkeypatch.setenv("PLATTER_TEST_BUDGET", "full")
    assert all(testing.spread(values, place) == values for place in places)

    monkeypatch.setenv("PLATTER_TEST_BUDGET", "fast")
    shares = [testing.spread(values, place) for place in places]
    assert all(len(share) == len(values) // testing.FAST_SHARE for share in shares)
    assert shares[0] == testing.spread(values, places[0])  # the same third every run
    assert set().union(*shares) == set(values)


def test_pytest_keeps_compiled_modules_out_of_the_tree_even_without_bytecode(monkeypatch):
    monkeypatch.setenv("PYTHONDONTWRITEBYTECODE", "1")

    env = cli.pytest_environment("fast")

    assert "PYTHONDONTWRITEBYTECODE" not in env
    assert env["PYTHONPYCACHEPREFIX"] == str(cli.BASE_DIR / ".local" / "pycache")
    assert env["DJANGO_SETTINGS_MODULE"] == "portal.settings.test"


def test_an_unfinished_staging_is_stopped_with_its_whole_process_group(tmp_path):
    """What `lab stage` starts (mmdebstrap, downloads) goes with it on Ctrl-C or a failed fast
    tier: a real process group, a Python child with a child of its own."""
    pid_file = tmp_path / "grandchild"
    spawn = (
        "import subprocess, sys\n"
        "p = subprocess.Popen(['sleep', '300'])\n"
        "open(sys.argv[1], 'w').write(str(p.pid))\n"
        "p.wait()\n"
    )
    child = subprocess.Popen([sys.executable, "-c", spawn, str(pid_file)], start_new_session=True)
    while not pid_file.exists() or not pid_file.read_text():
        time.sleep(0.01)
    grandchild = Path(f"/proc/{pid_file.read_text()}/stat")

    cli.stop_staging(child)

    assert child.returncode is not None
    for _ in range(500):  # a dead process may linger as a zombie until init reaps it
        if not grandchild.exists() or grandchild.read_text().split(")")[1].split()[0] == "Z":
            break
        time.sleep(0.01)
    else:
        raise AssertionError("the staging's own child outlived it")
