"""bench/noisy_tenant: its table, and one run at a tiny size (its own database, Redis database
and gunicorn, the node boundary faked in the server) where bob's answers are all the ones he
asked for and alice's downloads over her node-call limit are refused."""

import os
import subprocess
import sys

from django.conf import settings

from portal.tests.bench_scripts import load_bench

noisy = load_bench("noisy_tenant")


def timings(*ms: float, wrong: int = 0):
    return noisy.Timing([m / 1000 for m in ms], wrong)


def test_the_table_gives_both_phases_and_the_ratio_of_their_p95s():
    quiet = {kind: timings(10, 10, 20) for kind in noisy.KINDS}
    loud = {kind: timings(10, 30, 30) for kind in noisy.KINDS}
    text, good = noisy.table(quiet, loud)
    row = next(line for line in text.splitlines() if line.startswith("bob's API cluster list"))
    assert row.split()[-6:] == ["10.0", "20.0", "30.0", "30.0", "1.50x", "0"]
    assert good and "met" in text.splitlines()[-1]
    loud["quota"] = timings(10, 50, 50)
    assert noisy.table(quiet, loud)[1] is False  # 2.5x
    loud["quota"], quiet["submit"] = timings(10, 20), timings(10, 20, wrong=1)
    assert noisy.table(quiet, loud)[1] is False  # bob got a wrong answer


def test_a_tiny_run_refuses_alices_excess_and_answers_bob():
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "portal.settings.dev",
        "PLATTER_NODE_CALLS_PER_USER": "2",
    }
    argv = [
        *("--jobs", "3", "--downloads", "3", "--streams", "1", "--listers", "0"),
        *("--samples", "3", "--node-seconds", "0.2", "--no-plot"),
    ]
    run = subprocess.run(
        [sys.executable, str(settings.BASE_DIR / "bench" / "noisy_tenant.py"), *argv],
        capture_output=True,
        text=True,
        timeout=240,
        env=env,
    )
    out = run.stdout
    assert "request " in out, run.stdout + run.stderr
    rows = [line for line in out.splitlines() if line.startswith("bob's")]
    assert len(rows) == len(noisy.KINDS), out
    assert all(row.split()[-1] == "0" for row in rows), out  # bob: every answer as asked
    download = next(line for line in out.splitlines() if line.startswith("download"))
    assert "200: 2, 429: 1" in download, out  # her limit: 2 node calls
    submits = next(line for line in out.splitlines() if line.startswith("job submit"))
    assert "queued: 1" in submits, out  # 3 submits, her fair share is 2
