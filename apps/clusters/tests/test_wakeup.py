"""One way to wake the admission queue (apps/clusters/wakeup.py): a release, a leftover's
release and capacity back in the inventory each call wakeup.wake_queue, which admits right
away after a release (SCHEDULER_ADMIT_ON_RELEASE) and hands inventory changes to the workers."""

import ast
from pathlib import Path

import pytest

from apps.clusters import admission, leftovers, reservation, wakeup
from apps.clusters.models import Cluster, Leftover
from apps.inventory.models import Disk, Node
from apps.inventory.services import record_health_check, set_disk_state, set_node_state

from .factories import make_cluster, make_network, make_node, wants

pytestmark = pytest.mark.django_db
ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture
def wakes(monkeypatch):
    """What each wake_queue call was after, in order."""
    calls: list[str] = []
    monkeypatch.setattr(wakeup, "wake_queue", calls.append)
    return calls


@pytest.fixture
def sent(settings, monkeypatch):
    """Task names handed to the broker."""
    from portal.celery import app

    settings.DISPATCH_CLUSTER_TASKS = True
    names: list[str] = []
    monkeypatch.setattr(app, "send_task", lambda name, **kwargs: names.append(name))
    return names


def placed(owner) -> Cluster:
    cluster = make_cluster(owner, wants(1, disks=1))
    assert admission.admit_queued() == [cluster.id]
    return cluster


def test_a_release_wakes_the_queue(alice, wakes):
    make_network()
    make_node()
    cluster = placed(alice)
    assert wakes == []
    reservation.release(cluster.id)
    assert wakes == ["release"]
    reservation.release(cluster.id)  # nothing held any more: nothing came back
    assert wakes == ["release"]


def test_a_leftovers_release_wakes_the_queue(alice, wakes):
    make_network()
    make_node()
    cluster = placed(alice)
    instance = cluster.instances.get()
    reservation.release(cluster.id, unconfirmed=[instance.id])
    leftover = Leftover.objects.get(cluster=cluster)
    assert wakes == ["release"]
    assert leftovers.release(leftover, "is gone")
    assert wakes == ["release", "release"]
    assert not leftovers.release(leftover, "is gone")  # released once, woken once
    assert wakes == ["release", "release"]


def test_capacity_back_in_the_inventory_wakes_the_queue(wakes, settings):
    settings.NODE_DOWN_AFTER_FAILED_CHECKS = 1
    node = make_node(state="draining", disks={"hdd": 1})
    set_node_state(node.id, Node.State.ACTIVE)
    assert record_health_check(node.id, error="connection refused") == "down"
    assert record_health_check(node.id, images=[]) == "up"
    disk = node.disks.get()
    set_disk_state([disk.id], Disk.State.FAILED)
    set_disk_state([disk.id], Disk.State.AVAILABLE)
    assert wakes == ["inventory"] * 3


def test_after_a_release_the_queue_is_admitted_here_once_it_commits(
    alice, settings, sent, django_capture_on_commit_callbacks
):
    settings.SCHEDULER_ADMIT_ON_RELEASE = True
    make_network()
    make_node(disks={"hdd": 1})
    first = placed(alice)
    second = make_cluster(alice, wants(1, disks=1))
    assert admission.admit_queued() == []  # the only disk is taken
    sent.clear()
    with django_capture_on_commit_callbacks(execute=True):
        reservation.release(first.id)
    second.refresh_from_db()
    assert second.state == Cluster.State.PLACING
    assert sent == ["platter.launch_cluster"]  # its launch, not an admit task


def test_without_admission_on_release_a_release_leaves_the_queue_to_beat(
    alice, settings, sent, django_capture_on_commit_callbacks
):
    settings.SCHEDULER_ADMIT_ON_RELEASE = False
    make_network()
    make_node(disks={"hdd": 1})
    first = placed(alice)
    second = make_cluster(alice, wants(1, disks=1))
    sent.clear()
    with django_capture_on_commit_callbacks(execute=True):
        reservation.release(first.id)
    second.refresh_from_db()
    assert second.state == Cluster.State.QUEUED
    assert sent == []


def test_an_inventory_change_sends_the_admit_task_whatever_the_setting(
    settings, sent, django_capture_on_commit_callbacks
):
    for admit_on_release in (True, False):
        settings.SCHEDULER_ADMIT_ON_RELEASE = admit_on_release
        with django_capture_on_commit_callbacks(execute=True):
            wakeup.wake_queue("inventory")
    assert sent == ["platter.admit_queued"] * 2


# Where the queue may be admitted or its task named: the pass itself, the one wake-up, the
# app handing the pass to it, the services' re-export, the task's name and the task beat runs.
ADMITTERS = {
    "apps/clusters/admission.py",
    "apps/clusters/wakeup.py",
    "apps/clusters/apps.py",
    "apps/clusters/services.py",
    "apps/tasks/bus.py",
    "workers/tasks.py",
}


def test_nothing_else_wakes_the_queue():
    """No other module runs the admission pass or sends its task (tests aside)."""
    found = set()
    for folder in ("apps", "workers", "portal"):
        for path in (ROOT / folder).rglob("*.py"):
            if "tests" in path.parts:
                continue
            for node in ast.walk(ast.parse(path.read_text(), str(path))):
                name = getattr(node, "attr", None) or getattr(node, "id", None)
                if name in ("admit_queued", "ADMIT"):
                    found.add(str(path.relative_to(ROOT)))
    assert sorted(found - ADMITTERS) == []
