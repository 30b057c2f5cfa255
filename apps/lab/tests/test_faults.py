"""The fault suite on a portal of its own (./platter faults): a node's dockerd killed
mid-launch, the worker SIGKILLed mid-task, an instance's process killed, Redis and PostgreSQL
restarted. After each, every cluster is running or failed with a reason, and nothing leaks:
no disk, address or segment held by a failed or destroyed cluster, no orphan container, quota
usage that adds up (apps/lab/faults.py). Everything it started is gone afterwards."""

import json
import os
import subprocess
import sys

import pytest
from django.conf import settings

from apps.lab import devservers
from apps.lab.nodes import LabSpec
from apps.lab.place import lab_key
from apps.lab.tests.machine import machine_holds

pytestmark = pytest.mark.lab


@pytest.mark.timeout(2400)
def test_every_fault_ends_settled_with_nothing_leaked(tmp_path):
    report = tmp_path / "faults.json"
    env = {**os.environ, "PLATTER_FAULTS_SLOT": str(settings.LAB_ADDRESS_SLOT)}
    run = subprocess.run(
        [sys.executable, "-m", "apps.lab.cli", "faults", "--report", str(report)],
        cwd=devservers.BASE_DIR,
        env=env,
        capture_output=True,
        text=True,
        timeout=2300,
    )
    output = run.stdout + run.stderr
    assert report.exists(), output[-4000:]
    outcomes = json.loads(report.read_text())
    table = "\n".join(
        f"{o['fault']}: {o['recovered']}/{o['clusters']} settled, leaks: {o['leaks']}"
        for o in outcomes
    )
    assert [o["fault"] for o in outcomes] == [
        "dockerd killed mid-launch",
        "worker SIGKILLed mid-task",
        "instance process killed",
        "Redis restarted",
        "PostgreSQL restarted",
    ], table
    assert all(o["clusters"] > 0 for o in outcomes), table
    assert all(o["ok"] for o in outcomes), table
    assert run.returncode == 0, output[-4000:]
    # The suite's own portal and lab are gone: no daemon, mount, loop device or link.
    state = devservers.STATE_DIR / "faults"
    assert machine_holds(LabSpec(home=state / "lab", key=lab_key(state))) == []
