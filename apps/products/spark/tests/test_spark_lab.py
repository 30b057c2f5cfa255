"""Spark on the real lab, launched as a user does: a shuffle runs on the workers' own disks, and
an autoscaling policy grows the cluster while a job waits for cores (the new workers ALIVE)
and shrinks it back once the job is done."""

import json
import threading
import time
from datetime import timedelta

import pytest
from django.utils import timezone

from apps import nodes
from apps.clusters import autoscale
from apps.clusters.models import Cluster, ScalingPolicy
from workers import autoscale as autoscaling
from workers.tests.lab_products import (
    RESIZE_SECONDS,
    assert_no_secret_shown,
    attempt,
    data_dirs,
    destroy_and_check,
    instance,
    launch_default,
    launched,
    mapped_archives,
    run,
    shown_string,
    wait_for,
)

pytestmark = pytest.mark.django_db(transaction=True)
S = Cluster.State
# Runs its arguments in the background and stops them once their output names SASL (or
# after 40 s); prints that output and exits 1.
UNTIL_SASL = (
    '"$@" >/tmp/refused.log 2>&1 & client=$!; '
    "for _ in $(seq 80); do grep -q SASL /tmp/refused.log && break; sleep 0.5; done; "
    'kill "$client" 2>/dev/null; cat /tmp/refused.log; exit 1'
)


def test_spark_runs_a_shuffle_on_the_workers_disks(dispatching, lab_cleanup, alice):
    cluster = launch_default(alice, "spark", "spark-smoke")
    master = instance(cluster, "master")
    assert mapped_archives(master) == {"master.jsa"}
    assert mapped_archives(instance(cluster, "worker")) == {"worker.jsa"}
    assert master.disks == 0  # a 0-disk role reserves, places and runs
    steps = list(cluster.events.values_list("message", flat=True))
    assert any("Every worker registered" in s for s in steps), steps

    output = run(master, "/opt/platter/bin/spark-smoke")
    assert "spark-smoke: ok" in output
    for worker in cluster.instances.filter(role="worker").select_related("node"):
        local = list(data_dirs(worker)[0].glob("spark-local/spark-*"))
        assert local, f"no Spark local dir on {worker.hostname}'s dedicated disk"

    # The spark-submit line the page shows works on its own (no spark-defaults.conf in
    # SPARK_CONF_DIR=/tmp) ...
    job = ["/opt/platter/lib/spark_smoke_job.py", "2000"]
    submit = shown_string(cluster, "spark-submit")
    assert submit[-1] == "app.py"
    output = run(
        master,
        "env",
        "SPARK_CONF_DIR=/tmp",
        submit[0],
        "--driver-memory",
        "512m",
        "--conf",
        "spark.ui.enabled=false",
        *submit[1:-1],
        *job,
    )
    assert "reduceByKey: 2000 rows -> " in output and "WRONG" not in output, output[-2000:]
    # ... and a client without the secret is refused by the master. The client retries for a
    # minute before it gives up, so it is stopped once it has said why (or after 40 s).
    code, output = attempt(
        master,
        "sh",
        "-c",
        UNTIL_SASL,
        "refused-client",
        "env",
        "SPARK_CONF_DIR=/tmp",
        "spark-submit",
        "--master",
        f"spark://{master.hostname}:7077",
        "--driver-memory",
        "512m",
        "--conf",
        "spark.ui.enabled=false",
        *job,
    )
    assert code != 0 and "SASL" in output, output[-2000:]
    assert_no_secret_shown(cluster)
    destroy_and_check(cluster)


# 12 tasks of 4 s, which may use 3 cores: a minute on the one worker's core, 16 s on three.
WAITING_JOB = """import time
from pyspark import SparkContext
sc = SparkContext(appName="waits-for-cores")
print("slept", sc.parallelize(range(12), 12).map(lambda x: (time.sleep(4), x)[1]).sum())
"""


@pytest.mark.timeout(900)
def test_spark_autoscales_on_the_cores_a_job_waits_for(dispatching, lab_cleanup, alice):
    """A policy of 1 to 3 workers: a job asking for 3 cores on a 1-core cluster grows it
    within two cooldowns (the new workers ALIVE), finishes, and the cluster shrinks back to 1.
    The passes run here with a clock moved past each cooldown; the readings are the real
    master's and driver's."""
    cluster = launched(alice, "spark", "spark-autoscale", size=1, mem=1024)
    autoscale.set_policy(cluster.id, {"min_workers": 1, "max_workers": 3})
    master = instance(cluster, "master")
    run(master, "sh", "-c", f"cat > /tmp/waits.py <<'EOF'\n{WAITING_JOB}EOF")
    outcome: dict = {}

    def job() -> None:
        argv = ["spark-submit", "--driver-memory", "512m", "--executor-memory", "512m"]
        argv += ["--conf", "spark.cores.max=3"]
        outcome["result"] = nodes.client(master.node).exec(
            master.container_id, [*argv, "/tmp/waits.py"], 600
        )

    submitted = threading.Thread(target=job)
    submitted.start()
    clock = sized_within_two_cooldowns(cluster, timezone.now(), 3)
    alive = {w["host"] for w in master_status(master)["workers"] if w["state"] == "ALIVE"}
    assert len(alive) == 3, alive
    grows = cluster.events.filter(message__startswith="autoscaling: pending")
    assert grows.exists() and all("+" in e.message for e in grows), [e.message for e in grows]
    submitted.join(timeout=600)
    code, output = outcome.get("result", (None, "the job did not end"))
    assert code == 0 and "slept 66" in output, output[-2000:]

    sized_within_two_cooldowns(cluster, clock, 1)
    shrinks = [e.message for e in cluster.events.filter(message__contains=" workers")]
    assert any("; -" in m for m in shrinks), shrinks
    destroy_and_check(cluster)


def sized_within_two_cooldowns(cluster: Cluster, clock, workers: int):
    """Autoscaling's passes as beat runs them, with the clock moved past each cooldown:
    readings, then a decision, until the cluster runs with `workers` workers (at most two
    cooldowns). Returns the clock after the last decision."""
    cooldown = timedelta(seconds=ScalingPolicy.objects.get(cluster=cluster).cooldown_seconds)
    for _ in range(2):
        for _ in range(4):  # readings through the cooldown (the product's real answers)
            autoscaling.run_pass(clock)
            time.sleep(3)
        clock += cooldown + timedelta(seconds=1)
        autoscaling.run_pass(clock)  # the cooldown is over: a decision
        clock += timedelta(seconds=1)
        now = wait_for(cluster.id, S.RUNNING, seconds=RESIZE_SECONDS)
        if now.instances.filter(role="worker", active=True).count() == workers:
            return clock
    said = [e.message for e in cluster.events.order_by("-id")[:6]]
    pytest.fail(f"not {workers} workers after two cooldowns: {said}")


def master_status(master) -> dict:
    return json.loads(
        run(
            master,
            "python3",
            "-c",
            "import urllib.request; "
            f"print(urllib.request.urlopen('http://{master.hostname}:8080/json/').read().decode())",
        )
    )
