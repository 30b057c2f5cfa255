"""Every bench still starts: a bench breaks silently otherwise, since nothing runs it but a
person with the lab and minutes to spare (bench/jobs and bench/terasort called
recreate_database with arguments it no longer took, and stopped at their first step).

- Each bench's command (`bench/<name>`, and `python -m bench.<name>`) answers --help: the module
  imports as part of the `bench` package and its arguments parse.
- Without the lab, at the tiniest size: bench/reservation and bench/reservation_ceiling run
  their whole main path (own database, inventory, timed claims, the table and the plot, drawn
  by a stand-in for matplotlib, the benches' optional extra) in a process of their own.
- bench/api needs no lab but wrk, which the fast tier's machine need not have: its main path
  runs to that check and stops naming the package, having made nothing.
- The benches that need the lab (jobs, terasort, time_to_ready, streams, load, coupling) run
  their main path in this process, against the node fake with the lab reported down, as far
  as the lab check: their own database made (and their Celery worker started, here a stand-in)
  before it, dropped after it, and the portal's settings and environment as they were.
"""

import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import psycopg
import pytest
from django.conf import settings

from apps.lab import lab
from apps.nodes.fake import FakeNodes
from bench import bench_db, harness, plotting

ROOT = Path(settings.BASE_DIR)
BENCHES = sorted(
    p.name for p in (ROOT / "bench").iterdir() if p.suffix == "" and p.with_suffix(".py").exists()
)


def test_the_benches_are_found():
    assert {"api", "jobs", "terasort", "time_to_ready", "reservation", "load"} <= set(BENCHES)


@pytest.mark.parametrize("name", BENCHES)
def test_each_bench_command_parses_its_arguments(name, tmp_path):
    """From any folder, as bench/README.md runs them; and as modules from the checkout."""
    by_path = subprocess.run(
        [sys.executable, str(ROOT / "bench" / name), "--help"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=False,
    )
    assert by_path.returncode == 0, by_path.stderr
    assert by_path.stdout.startswith("usage: ") and "--" in by_path.stdout
    as_module = subprocess.run(
        [sys.executable, "-m", f"bench.{name}", "--help"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert as_module.returncode == 0, as_module.stderr
    assert as_module.stdout == by_path.stdout


# ------------------------------------------------------------------ no lab: the whole run

STAND_IN_PYPLOT = textwrap.dedent(
    """
    from pathlib import Path
    from unittest.mock import MagicMock


    def subplots(nrows=1, ncols=1, **_):
        fig = MagicMock()
        fig.savefig.side_effect = lambda path, **_: Path(path).write_bytes(b"stand-in plot")
        axes = [MagicMock() for _ in range(nrows * ncols)]
        return fig, axes[0] if len(axes) == 1 else axes
    """
)


def server_databases() -> set[str]:
    with psycopg.connect(bench_db.server_dsn("postgres"), autocommit=True) as conn:
        return {row[0] for row in conn.execute("SELECT datname FROM pg_database")}


def own_name(what: str) -> str:
    """A database name of this test database's own (the suite's processes run side by side)."""
    return f"{settings.DATABASES['default']['NAME']}_{what}"


def run_bench(name: str, argv: list[str], tmp_path: Path, **env: str):
    stand_in = tmp_path / "stand-in" / "matplotlib"
    stand_in.mkdir(parents=True)
    (stand_in / "__init__.py").write_text("def use(backend):\n    pass\n")
    (stand_in / "pyplot.py").write_text(STAND_IN_PYPLOT)
    out = tmp_path / "out"
    return out, subprocess.run(
        [sys.executable, str(ROOT / "bench" / name), *argv],
        env={
            **os.environ,
            "PYTHONPATH": str(stand_in.parent),
            "PLATTER_BENCH_OUT": str(out),
            **env,
        },
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )


def test_the_reservation_bench_runs_whole_at_the_tiniest_size(tmp_path):
    database = own_name("bench_reservation")
    out, done = run_bench(
        "reservation",
        ["--sizes", "10", "--clients", "1", "--clusters", "1", "--claims", "1"],
        tmp_path,
        PLATTER_BENCH_DB=database,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    rows = [line.split() for line in done.stdout.splitlines() if line.startswith("    10 ")]
    assert [row[1:4] for row in rows] == [["4", "inst", "x"], ["1", "inst", "x"]]
    assert all(row[7] == "1" and row[-1] == "0" for row in rows)  # 1 claim ok, nothing doubled
    assert (out / "reservation.png").read_bytes() == b"stand-in plot"
    assert database not in server_databases()


def test_the_reservation_ceiling_bench_runs_whole_at_the_tiniest_size(tmp_path):
    database = own_name("bench_ceiling")
    _out, done = run_bench(
        "reservation_ceiling",
        ["--nodes", "10", "--clients", "1", "--claims", "1"],
        tmp_path,
        PLATTER_BENCH_DB=database,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    paths = [line.split()[1] for line in done.stdout.splitlines() if line.startswith("  1 ")]
    assert paths[:2] == ["python", "one"]  # the Python claims, then the one call
    assert database not in server_databases()


def test_the_api_bench_stops_at_once_without_wrk_naming_it(tmp_path):
    no_wrk = tmp_path / "bin"
    no_wrk.mkdir()
    _out, done = run_bench("api", ["--users", "1", "--clusters", "1"], tmp_path, PATH=str(no_wrk))
    assert done.returncode == 1
    assert "apt-get install wrk" in done.stderr
    assert "platter_bench_api" not in server_databases()


# ------------------------------------------------------------------ the lab's benches


@pytest.fixture
def without_the_lab(monkeypatch, settings, tmp_path) -> Iterator[dict]:
    """The lab down, the nodes fake, matplotlib not needed, plots in tmp_path; the settings,
    environment and default database the benches switch put back afterwards."""
    monkeypatch.setattr(lab, "is_up", lambda spec=None: False)
    monkeypatch.setattr(plotting, "require", lambda: None)
    monkeypatch.setenv("PLATTER_BENCH_OUT", str(tmp_path))
    for name in ("PLATTER_SITE", "LAB_ADDRESS_SLOT", "CELERY_BROKER_URL", "CELERY_RESULT_BACKEND"):
        setattr(settings, name, getattr(settings, name))  # the fixture restores them
    environment = dict(os.environ)
    database = dict(settings.DATABASES["default"])
    cache = dict(settings.CACHES["default"])
    seen: dict = {"workers": []}

    @contextmanager
    def celery_worker(name: str, log_path: Path) -> Iterator[None]:
        seen["workers"].append((name, name in server_databases()))
        yield

    monkeypatch.setattr(harness, "celery_worker", celery_worker)
    try:
        with FakeNodes():
            yield seen
    finally:
        os.environ.clear()
        os.environ.update(environment)
        settings.DATABASES["default"].update(database)
        settings.CACHES["default"].update(cache)


@pytest.mark.parametrize(
    ("name", "argv"),
    [
        ("jobs", ["--rounds", "1"]),
        ("autoscaling", ["--tasks", "2", "--task-seconds", "1"]),
        ("time_to_ready", ["--sizes", "1", "--repeat", "1"]),
        ("time_to_ready", ["--products", "spark", "--repeat", "1"]),
        ("terasort", ["--size-mb", "1", "--repeat", "1", "--layouts", "1", "--workers", "2"]),
    ],
)
def test_a_lab_bench_makes_its_database_and_worker_then_stops_at_the_lab(
    name, argv, without_the_lab, monkeypatch, tmp_path
):
    import importlib

    module = importlib.import_module(f"bench.{name}")
    database = own_name(f"bench_{name}")
    monkeypatch.setattr(module, "BENCH_DB", database)
    if name == "terasort":  # root and cgroup v1's blkio, checked before anything is made
        monkeypatch.setattr(os, "geteuid", lambda: 0)
        (tmp_path / "blkio.throttle.read_bps_device").write_text("")
        monkeypatch.setattr(module, "BLKIO", tmp_path)
        monkeypatch.setattr(module, "WORK", tmp_path / "work")
    portal_database = settings.DATABASES["default"]["NAME"]

    with pytest.raises(SystemExit, match=r"the lab is not running: start it with ./platter lab up"):
        module.main(argv)

    assert without_the_lab["workers"] == [(database, True)]  # made before the worker started
    assert database not in server_databases()
    assert settings.DATABASES["default"]["NAME"] == portal_database


def test_the_streams_bench_drops_its_database_when_the_lab_is_down(without_the_lab, monkeypatch):
    from bench import streams

    database = own_name("bench_streams")
    monkeypatch.setattr(streams, "STREAMS_DB", database)
    with pytest.raises(SystemExit, match="the lab is not running"):
        streams.main(["--follows", "1", "--drips", "1", "--samples", "1"])
    assert database not in server_databases()


def test_the_load_bench_makes_nothing_when_the_lab_is_down(without_the_lab, monkeypatch):
    from bench import load

    database = own_name("bench_load")
    monkeypatch.setattr(load, "LOAD_DB", database)
    with pytest.raises(SystemExit, match="the lab is not running"):
        load.main(["--duration", "1", "--users", "1"])
    assert database not in server_databases()


def test_the_coupling_bench_stops_naming_the_lab_when_no_node_answers(without_the_lab, monkeypatch):
    from bench import coupling

    monkeypatch.setattr(coupling, "up", lambda node: False)
    with pytest.raises(SystemExit, match=r"no lab node answers: ./platter lab up"):
        coupling.main(["--runtime", "1", "--repeat", "1"])
