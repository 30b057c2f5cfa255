"""Spark on the real lab, launched as a user does: a shuffle runs on the workers' own disks, and
a grow adds a worker the master lists ALIVE."""

import json

import pytest

from apps.clusters.models import Cluster
from workers.tests.lab_products import (
    assert_no_secret_shown,
    attempt,
    data_dirs,
    destroy_and_check,
    instance,
    launch_default,
    launched,
    mapped_archives,
    resized,
    run,
    shown_string,
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


@pytest.mark.timeout(900)
def test_spark_grows_and_the_new_worker_is_alive(dispatching, lab_cleanup, alice):
    cluster = launched(alice, "spark", "spark-resize", size=1, mem=1024)
    resized(cluster, 2)
    master = instance(cluster, "master")
    status = run(
        master,
        "python3",
        "-c",
        "import urllib.request; "
        f"print(urllib.request.urlopen('http://{master.hostname}:8080/json/').read().decode())",
    )
    workers = json.loads(status)["workers"]
    alive = {w["host"] for w in workers if w["state"] == "ALIVE"}
    new = instance(cluster, "worker", 1)
    assert len(alive) == 2 and (new.hostname in alive or new.address.ip in alive), workers
    destroy_and_check(cluster)
