"""Clusters on the real lab, driven by a real Celery worker: placement, limits, disks,
networking, stop/start/destroy, and what happens when nodes, workers or containers die."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from django.conf import settings
from django.core.management import call_command
from django.utils import timezone

from apps import nodes
from apps.catalog.models import ProductVersion
from apps.clusters import services
from apps.clusters.models import Cluster, DiskAllocation, Instance
from apps.clusters.tests.waiting import wait_for
from apps.inventory.models import Disk, Node
from apps.lab import daemons, host
from apps.lab.nodes import lab_nodes
from apps.nodes import engine
from workers import operations, reconciler

pytestmark = pytest.mark.django_db(transaction=True)
S = Cluster.State


@pytest.fixture
def demo_version():
    call_command("load_catalog", verbosity=0)
    return ProductVersion.objects.get(product__name="demo")


def only_nodes(*names: str) -> None:
    """Leave only these lab nodes open to placements."""
    Node.objects.exclude(name__in=names).update(state=Node.State.DRAINING)
    Node.objects.filter(name__in=names).update(state=Node.State.ACTIVE)


def exec_in(instance: Instance, *argv: str) -> tuple[int, str]:
    assert instance.node is not None, "placed on a node"
    return nodes.client(instance.node).exec(instance.container_id, list(argv), 30)


def inspect(instance: Instance) -> dict:
    assert instance.node is not None, "placed on a node"
    return engine.cached(instance.node).api.inspect_container(instance.container_id)


def held_disks(instance: Instance) -> list[Disk]:
    return [a.disk for a in instance.allocations.filter(active=True).order_by("disk__mount_path")]


def data_path(disk: Disk, cluster: Cluster) -> Path:
    return Path(disk.mount_path) / settings.PLATTER_SITE / f"cluster-{cluster.id}"


def test_a_cluster_spreads_over_the_tls_nodes_and_another_runs_over_ssh(
    dispatching, lab_cleanup, alice, demo_version
):
    only_nodes("lab-1", "lab-2", "lab-3")
    spread = services.launch(alice, demo_version, "spread", {"size": 2, "mem": 96})
    spread = wait_for(spread.id, S.RUNNING)
    instances = list(spread.instances.select_related("node", "address__network"))
    assert sorted(i.node.name for i in instances) == ["lab-1", "lab-2", "lab-3"]

    for instance in instances:
        info = inspect(instance)
        config = info["HostConfig"]
        assert config["NanoCpus"] == instance.cores * 10**9
        assert config["Memory"] == 96 * 2**20
        assert config["PidsLimit"] == settings.CONTAINER_PIDS_LIMIT
        assert config["CapDrop"] == ["ALL"]
        assert not config["CapAdd"]  # not even Docker's NET_RAW: no forged ARP on the segment
        assert "no-new-privileges" in config["SecurityOpt"]
        assert config["Privileged"] is False
        # Nothing of the host's: network, process and IPC namespaces, devices, ports.
        network_name = instance.address.network.docker_name
        assert config["NetworkMode"] == network_name
        assert config["PidMode"] == "" and config["UTSMode"] == ""
        assert config["IpcMode"] in ("private", "shareable")
        assert not config["Devices"] and not config["PortBindings"]
        # ...as the kernel sees it from inside: no capability at all, nor a way to get one.
        code, status = exec_in(instance, "cat", "/proc/self/status")
        fields = dict(line.split(":\t", 1) for line in status.splitlines() if ":\t" in line)
        assert code == 0 and fields["NoNewPrivs"].strip() == "1"
        assert int(fields["CapEff"], 16) == int(fields["CapBnd"], 16) == 0
        disk = held_disks(instance)[0]
        assert config["Binds"] == [f"{data_path(disk, spread)}:/data/1:rw"]
        assert [m["Source"] for m in info["Mounts"]] == [str(data_path(disk, spread))]
        network = info["NetworkSettings"]["Networks"][network_name]
        assert network["IPAddress"] == instance.address.ip
        assert info["Config"]["Hostname"] == instance.hostname
        assert info["Config"]["Labels"]["platter.instance"] == str(instance.id)

    # A file written in /data/1 lands on the disk the database names, and on no other.
    for instance in instances:
        code, _ = exec_in(instance, "sh", "-c", f"echo {instance.hostname} > /data/1/probe")
        assert code == 0
    lab_disks = Disk.objects.filter(node__name__startswith="lab-")
    for instance in instances:
        holder = held_disks(instance)[0]
        places = [
            d
            for d in lab_disks
            if (data_path(d, spread) / "probe").is_file()
            and (data_path(d, spread) / "probe").read_text().strip() == instance.hostname
        ]
        assert places == [holder]

    # Members reach each other by hostname across nodes.
    master = next(i for i in instances if i.role == "master")
    for other in instances:
        code, output = exec_in(
            master, "timeout", "5", "wget", "-q", "-O", "-", f"http://{other.hostname}/"
        )
        assert code == 0, output

    only_nodes("lab-ssh")
    remote = services.launch(alice, demo_version, "over-ssh", {"size": 1})
    remote = wait_for(remote.id, S.RUNNING)
    assert {i.node.name for i in remote.instances.select_related("node")} == {"lab-ssh"}
    worker = remote.instances.select_related("node").get(role="worker")
    code, output = exec_in(worker, "cat", "/data/1/platter-configured")
    assert code == 0 and "worker-0 worker configured" in output

    # Destroying with a wipe empties the cluster's folders; the default keeps them.
    services.request_destroy(spread.id, keep_data=False)
    services.request_destroy(remote.id)
    wait_for(spread.id, S.DESTROYED)
    wait_for(remote.id, S.DESTROYED)
    assert not any(data_path(d, spread).exists() for d in lab_disks)
    kept = DiskAllocation.objects.filter(instance__cluster=remote, data_kept=True)
    assert kept.count() == 2
    assert all((data_path(a.disk, remote) / "platter-configured").is_file() for a in kept)
    for instance in instances:
        with pytest.raises(Exception, match="No such container"):
            inspect(instance)
    assert not Instance.objects.filter(active=True).exists()
    assert not Disk.objects.filter(state=Disk.State.ALLOCATED).exists()


def test_stop_keeps_everything_and_start_brings_the_same_data_back(
    dispatching, lab_cleanup, alice, demo_version
):
    cluster = services.launch(alice, demo_version, "pausing", {"size": 1})
    cluster = wait_for(cluster.id, S.RUNNING)
    worker = cluster.instances.select_related("node").get(role="worker")
    exec_in(worker, "sh", "-c", "echo before-stop > /data/1/note")
    held_before = sorted(a.disk_id for a in DiskAllocation.objects.filter(active=True))

    services.request_stop(cluster.id)
    wait_for(cluster.id, S.STOPPED)
    assert inspect(worker)["State"]["Running"] is False
    assert sorted(a.disk_id for a in DiskAllocation.objects.filter(active=True)) == held_before

    services.request_start(cluster.id)
    wait_for(cluster.id, S.RUNNING)
    worker.refresh_from_db()
    assert inspect(worker)["State"]["Running"] is True
    assert exec_in(worker, "cat", "/data/1/note") == (0, "before-stop\n")

    # The data comes back too when a new cluster reuses the destroyed one's disks.
    services.request_destroy(cluster.id)
    wait_for(cluster.id, S.DESTROYED)
    again = services.launch(alice, demo_version, "again", {"size": 1}, reuse_data_of=cluster)
    again = wait_for(again.id, S.RUNNING)
    worker = again.instances.select_related("node").get(role="worker")
    assert exec_in(worker, "cat", "/data/1/note") == (0, "before-stop\n")
    assert sorted(a.disk_id for a in DiskAllocation.objects.filter(active=True)) == held_before


def stop_daemon(name: str) -> None:
    """Kill a lab node's dockerd without cleaning up, like a node that crashed."""
    node = next(n for n in lab_nodes() if n.name == name)
    host.stop_process(node.pidfile, f"dockerd of {name}")


def start_daemon(name: str) -> None:
    node = next(n for n in lab_nodes() if n.name == name)
    daemons.start_dockerd(node)
    daemons.wait_for_dockerd(node)


def test_a_node_dying_mid_launch_gets_the_cluster_re_placed_and_leaves_nothing_behind(
    dispatching, lab_cleanup, alice, demo_version, settings
):
    # Reserve here (so the plan is known), kill the daemon of one chosen node, then let the
    # worker create the containers.
    settings.DISPATCH_CLUSTER_TASKS = False
    from apps.clusters.reservation import reserve

    cluster = services.launch(alice, demo_version, "unlucky", {"size": 3})
    reserve(cluster.id)
    victim = cluster.instances.exclude(node__name="lab-ssh").first().node
    stop_daemon(victim.name)
    nodes.client(victim).forget()
    try:
        from workers.tasks import launch_cluster

        launch_cluster.delay(cluster.id)
        cluster = wait_for(cluster.id, S.RUNNING, S.FAILED, seconds=120)
        assert cluster.state == S.RUNNING, cluster.reason
        assert cluster.avoid_nodes == [victim.id]
        assert not Instance.objects.filter(node=victim, active=True).exists()
        assert not DiskAllocation.objects.filter(disk__node=victim, active=True).exists()
        messages = [e.message for e in cluster.events.all()]
        assert any(m.startswith(f"queued: re-placing away from {victim.name}") for m in messages)

        # The reconciler marks the silent node down after repeated failed checks...
        for _ in range(settings.NODE_DOWN_AFTER_FAILED_CHECKS):
            report = reconciler.reconcile(grace_seconds=0)
        assert victim.name in report["marked_down"]
        assert Node.objects.get(id=victim.id).state == Node.State.DOWN
    finally:
        start_daemon(victim.name)
        nodes.client(victim).forget()
    # ...and back up when it answers; no container of ours is left on it.
    report = reconciler.reconcile(grace_seconds=0)
    assert victim.name in report["back_up"]
    assert Node.objects.get(id=victim.id).state == Node.State.ACTIVE
    site = f"platter.site={settings.PLATTER_SITE}"
    leftovers = engine.cached(victim).containers.list(all=True, filters={"label": site})
    assert leftovers == []


def test_the_reconciler_starts_a_killed_container_again_then_fails_and_removes_orphans(
    dispatching, lab_cleanup, alice, demo_version, settings
):
    settings.CONTAINER_RESTARTS = 1
    cluster = services.launch(alice, demo_version, "fragile", {"size": 2})
    cluster = wait_for(cluster.id, S.RUNNING)
    victim = cluster.instances.select_related("node").get(role="worker", index=1)
    # Stopped behind the portal's back (Docker restarts only crashes): the reconciler, as a
    # supervisor, starts it again with its disks.
    engine.cached(victim.node).api.kill(victim.container_id)
    report = reconciler.reconcile()
    assert report["restarted"] == [f"{cluster.id}/{victim.hostname}"]
    assert inspect(victim)["State"]["Running"]
    cluster.refresh_from_db()
    assert cluster.state == S.RUNNING
    assert cluster.events.filter(message__contains="started it again (1 of 1)").exists()

    # A container with our labels that no instance owns (say, left by a node that did not
    # answer during a destroy) is removed once past the grace period, not before.
    node = victim.node
    api = engine.cached(node).api
    orphan = api.create_container(
        settings.LAB_IMAGE,
        ["sleep", "60"],
        name=f"{settings.PLATTER_SITE}-orphan",
        labels={"platter.site": settings.PLATTER_SITE, "platter.instance": "999999"},
    )
    assert reconciler.reconcile()["orphans_removed"] == []
    removed = reconciler.reconcile(grace_seconds=0)["orphans_removed"]
    assert removed == [f"{node.name}/{settings.PLATTER_SITE}-orphan"]
    with pytest.raises(Exception, match="No such container"):
        api.inspect_container(orphan["Id"])
    assert all(inspect(i)["State"]["Running"] for i in cluster.instances.select_related("node"))

    # Stopped again with its restarts used up: the cluster fails, naming the instance and its
    # last log lines, and gives back everything it held.
    engine.cached(victim.node).api.kill(victim.container_id)
    reconciler.reconcile()
    cluster.refresh_from_db()
    assert cluster.state == S.FAILED
    assert cluster.reason.startswith(f"{victim.hostname}'s container on {node.name} stopped")
    assert "last log lines" in cluster.reason
    assert not Instance.objects.filter(cluster=cluster, active=True).exists()
    assert not DiskAllocation.objects.filter(instance__cluster=cluster, active=True).exists()


@pytest.fixture
def fault_worker(django_db_setup, celery_worker_process):
    """A prefork worker with one child on a queue of its own, so a test can kill the child
    that runs a task and watch Celery deliver the task again."""
    env = dict(os.environ)
    env.update(
        DJANGO_SETTINGS_MODULE="portal.settings.test",
        DATABASE_URL=_database_url(),
        PLATTER_DISPATCH_CLUSTER_TASKS="1",
    )
    log = open(settings.STATE_DIR / "fault-worker.log", "w")  # noqa: SIM115
    worker = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "celery",
            "-A",
            "portal",
            "worker",
            "-P",
            "prefork",
            "-c",
            "1",
            "-Q",
            "fault",
            "-n",
            f"fault-{os.getpid()}@%h",
            "--without-gossip",
            "--without-mingle",
            "-l",
            "info",
        ],
        cwd=settings.BASE_DIR,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    from portal.celery import app

    deadline = time.monotonic() + 60
    while not any(name.startswith("fault-") for r in app.control.ping(timeout=0.5) for name in r):
        assert worker.poll() is None and time.monotonic() < deadline, f"see {log.name}"
    yield worker
    worker.terminate()
    worker.wait(timeout=20)
    log.close()


def _database_url() -> str:
    from conftest import _database_url as url

    return url(settings.DATABASES["default"])


def children_of(pid: int) -> list[int]:
    found: list[int] = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        text = (task / "children").read_text().split()
        found.extend(int(p) for p in text)
    return found


def test_a_worker_killed_mid_launch_has_its_task_run_again_to_running_once(
    fault_worker, lab_cleanup, alice, demo_version, settings
):
    settings.DISPATCH_CLUSTER_TASKS = False  # we send the task to the fault worker ourselves
    cluster = services.launch(alice, demo_version, "survivor", {"size": 3})
    from workers.tasks import launch_cluster

    child = children_of(fault_worker.pid)
    launch_cluster.apply_async([cluster.id], queue="fault")
    wait_for(cluster.id, S.PLACING, S.CONFIGURING, S.RUNNING)
    for pid in child:
        os.kill(pid, signal.SIGKILL)  # the child running the task, mid-way through it

    cluster = wait_for(cluster.id, S.RUNNING, S.FAILED, seconds=120)
    assert cluster.state == S.RUNNING, cluster.reason
    assert cluster.events.filter(message="running").count() == 1
    site = f"platter.site={settings.PLATTER_SITE}"
    for instance in cluster.instances.select_related("node"):
        labels = {"label": [site, f"platter.instance={instance.id}"]}
        assert len(engine.cached(instance.node).containers.list(all=True, filters=labels)) == 1


def test_beat_destroys_an_expired_lease_and_the_queue_takes_the_freed_disks(
    dispatching, lab_cleanup, alice, bob, demo_version
):
    only_nodes("lab-1")  # 4 HDDs: master and worker with 2 each fill it; the next one waits
    first = services.launch(alice, demo_version, "leased", {"size": 1, "disks": 2}, lease_hours=1)
    wait_for(first.id, S.RUNNING)
    waiting = services.launch(bob, demo_version, "patient", {"size": 1, "disks": 1})
    waiting = wait_for(waiting.id, S.QUEUED)
    time.sleep(1)
    waiting.refresh_from_db()
    assert waiting.state == S.QUEUED and "HDD disks" in waiting.reason

    Cluster.objects.filter(id=first.id).update(expires_at=timezone.now())
    from workers.tasks import expire_leases

    assert expire_leases.delay().get(timeout=30) == [first.id]
    wait_for(first.id, S.DESTROYED)
    assert (
        engine.cached(Node.objects.get(name="lab-1")).containers.list(
            all=True, filters={"label": f"platter.cluster={first.id}"}
        )
        == []
    )
    wait_for(waiting.id, S.RUNNING)  # admitted as soon as the release committed


def test_an_image_no_node_can_get_fails_the_launch_naming_image_and_node(
    dispatching, lab_cleanup, alice, demo_version
):
    missing = "127.0.0.1:9/nowhere/missing:1"  # a registry that refuses at once
    demo_version.image = missing
    demo_version.save(update_fields=["image"])
    cluster = services.launch(alice, demo_version, "imageless", {"size": 1})
    cluster = wait_for(cluster.id, S.FAILED)
    assert f"image {missing} is not on the node and could not be pulled" in cluster.reason
    assert "node lab-" in cluster.reason
    assert not Instance.objects.filter(active=True).exists()
    assert not Disk.objects.filter(state=Disk.State.ALLOCATED).exists()


def test_a_cluster_whose_task_was_lost_is_resumed_by_beat(
    dispatching, lab_cleanup, alice, demo_version, settings
):
    settings.DISPATCH_CLUSTER_TASKS = False  # the launch task "gets lost"
    cluster = services.launch(alice, demo_version, "forgotten", {"size": 1})
    from apps.clusters.reservation import reserve

    reserve(cluster.id)
    assert operations.resume_stalled(older_than=60) == []  # not stalled long enough yet

    settings.DISPATCH_CLUSTER_TASKS = True
    assert operations.resume_stalled(older_than=0) == [cluster.id]
    wait_for(cluster.id, S.RUNNING)
    assert cluster.events.filter(message__contains="resuming").count() == 1

    settings.DISPATCH_CLUSTER_TASKS = False  # and now the destroy task "gets lost"
    services.request_destroy(cluster.id, keep_data=False)
    settings.DISPATCH_CLUSTER_TASKS = True
    assert operations.resume_stalled(older_than=0) == [cluster.id]
    wait_for(cluster.id, S.DESTROYED)
    assert cluster.events.filter(message__startswith="wiped 1 disks").count() == 2
