"""Queues by kind of work (portal/queues.py): every task goes to a queue some worker consumes,
and a node job stuck on a silent node does not delay cluster work."""

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from django.conf import settings
from django.core.management import call_command

from apps.catalog.models import ProductVersion
from apps.clusters import services
from apps.clusters.models import Cluster
from apps.clusters.tests.waiting import wait_for
from apps.inventory.models import Disk, Node
from portal.celery import app
from portal.queues import (
    ALL_QUEUES,
    CLUSTERS,
    IDLE,
    JOBS,
    NODES,
    PERIODIC,
    SSH_KEYS,
    TASK_QUEUES,
)
from workers import tasks

BASE_DIR = Path(__file__).resolve().parents[2]


def queue_of(task_name: str) -> str:
    return app.amqp.router.route({}, task_name)["queue"].name


def test_every_platter_task_goes_to_a_queue_the_workers_consume():
    names = [name for name in app.tasks if name.startswith("platter.")]
    assert len(names) >= 10
    assert set(names) <= set(TASK_QUEUES), "a task without a queue of its own: see portal/queues"
    assert {queue_of(name) for name in names} <= set(ALL_QUEUES)
    assert queue_of("an.unrouted.task") in ALL_QUEUES
    # Declared up front, so a purge empties them all (other tests add queues of their own to
    # app.amqp.queues as they publish to them, hence the settings).
    assert {queue.name for queue in settings.CELERY_TASK_QUEUES} == set(ALL_QUEUES)
    # ...each bound by a key of its own, so a message reaches exactly one of them.
    assert all(q.routing_key == q.exchange.name == q.name for q in settings.CELERY_TASK_QUEUES)
    for name in ("launch_cluster", "stop_cluster", "start_cluster", "destroy_cluster"):
        assert queue_of(f"platter.{name}") == CLUSTERS
    assert queue_of("platter.bench_disks") == NODES
    # Key changes wait in a queue of their own, never in front of a launch.
    assert queue_of("platter.sync_ssh_keys") == SSH_KEYS != CLUSTERS
    # Users' jobs and the probes of their containers, each in a queue of their own too.
    assert queue_of("platter.run_job") == queue_of("platter.follow_job") == JOBS
    assert queue_of("platter.stop_idle") == IDLE
    assert queue_of("platter.admit_jobs") == PERIODIC


def test_beat_work_is_periodic_expires_and_everything_routed_has_a_time_limit():
    for entry in settings.CELERY_BEAT_SCHEDULE.values():
        # The idle probes and autoscaling's readings exec into tenants' containers: a queue
        # of their own, so a slow one never holds the slots of reconcile, leases, admission
        # or adoption.
        probing = entry["task"] in ("platter.stop_idle", "platter.autoscale")
        assert queue_of(entry["task"]) == (IDLE if probing else PERIODIC)
        assert entry["options"]["expires"] == entry["schedule"]
    for name in settings.CELERY_TASK_ROUTES:
        assert app.tasks[name].time_limit, f"{name} may run forever"
    assert app.tasks["platter.bench_disks"].time_limit > app.tasks["platter.reconcile"].time_limit


def _database_url() -> str:
    db = settings.DATABASES["default"]
    password = f":{db['PASSWORD']}" if db.get("PASSWORD") else ""
    return f"postgres://{db['USER']}{password}@{db['HOST']}:{db['PORT']}/{db['NAME']}"


def _wait(condition, what: str, seconds: float = 60) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"gave up waiting: {what}")
        time.sleep(0.2)


@pytest.fixture
def nodes_worker(dispatching):
    """Production's split on this run's broker: the `nodes` queue leaves the shared test
    worker for a worker of its own with one slot, which waits on a silent node for as long as
    the test wants (a node API timeout of 10 minutes, no retry)."""
    shared = [
        name
        for name, queues in (app.control.inspect().active_queues() or {}).items()
        if NODES in {q["name"] for q in queues}
    ]
    app.control.cancel_consumer(NODES, destination=shared, reply=True)
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "portal.settings.test",
        "DATABASE_URL": _database_url(),
        "PLATTER_NODE_API_TIMEOUT": "600",
        "PLATTER_NODE_API_RETRIES": "1",
    }
    name = f"nodes-{os.getpid()}@{socket.gethostname()}"
    log_path = settings.STATE_DIR / f"test-nodes-worker-{settings.PLATTER_SITE}.log"
    log = open(log_path, "w")  # noqa: SIM115 (closed below)
    worker = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "celery",
            "-A",
            "portal",
            "worker",
            "-Q",
            NODES,
            "-P",
            "threads",
            "-c",
            "1",
            "-n",
            name,
            "--without-gossip",
            "--without-mingle",
            "-l",
            "info",
        ],
        cwd=BASE_DIR,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        _wait(lambda: app.control.ping(destination=[name], timeout=0.5), "the nodes worker")
        yield name
    finally:
        worker.terminate()
        worker.wait(timeout=30)
        log.close()
        app.control.add_consumer(NODES, destination=shared, reply=True)


@pytest.fixture
def silent_node(lab_inventory):
    """A node that accepts connections and never answers (a hung dockerd, a stuck link)."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)  # connections queue up in the kernel and nobody ever reads them
    tls_dir = next(node.tls_dir for node in lab_inventory if node.tls_dir)
    node = Node.objects.create(
        name="silent",
        endpoint=f"tcp://127.0.0.1:{listener.getsockname()[1]}",
        tls_dir=tls_dir,
        cores=1,
        memory_mb=256,
        state=Node.State.MAINTENANCE,
    )
    Disk.objects.create(node=node, mount_path="/srv/platter/disks/d1", capacity_bytes=2**30)
    yield node, listener
    listener.close()


@pytest.mark.django_db(transaction=True)
def test_a_benchmark_stuck_on_a_silent_node_does_not_delay_a_launch(
    nodes_worker, silent_node, lab_cleanup, alice
):
    node, listener = silent_node
    bench = tasks.bench_disks.delay(node.id)

    def bench_running() -> bool:
        active = app.control.inspect(destination=[nodes_worker]).active() or {}
        return bench.id in {task["id"] for task in active.get(nodes_worker, [])}

    _wait(bench_running, "the benchmark to start on the nodes worker")

    call_command("load_catalog", verbosity=0)
    demo = ProductVersion.objects.get(product__name="demo")
    cluster = services.launch(alice, demo, "beside-silent", {"size": 1, "mem": 64})
    wait_for(cluster.id, Cluster.State.RUNNING)
    assert not bench.ready() and bench_running(), "the silent node's job ended on its own"

    listener.close()  # the node goes away for good: the job fails fast and frees its slot
    assert bench.get(timeout=60).startswith("0 measured, 1 failed")


def test_no_task_outlives_the_visibility_timeout_so_none_runs_twice_at_once():
    """acks_late tasks stay unacknowledged while they run; Redis hands such a task to another
    worker once the visibility timeout passes. Every task is cut at the time limit first."""
    from portal.celery import app

    assert app.conf.task_acks_late
    limit = app.conf.task_time_limit
    assert limit and app.conf.broker_transport_options["visibility_timeout"] > limit
