"""Marking disks failed, retired or available again: locked, audited, never under a holder."""

import functools
import time

import pytest

from apps.accounts.models import Quota
from apps.audit.models import AuditEvent
from apps.clusters.reservation import Reservation, release, reserve
from apps.clusters.tests.factories import held_disks, make_cluster, make_network, make_node, wants
from apps.clusters.tests.parallel import run_together
from apps.inventory.models import Disk
from apps.inventory.services import set_disk_state

A = AuditEvent.Action


@pytest.mark.django_db
def test_a_held_disk_marked_failed_keeps_its_holder_and_leaves_the_pool_on_release(alice):
    make_network()
    make_node(disks={"hdd": 3})
    cluster = make_cluster(alice, wants(1, disks=2))
    assert isinstance(reserve(cluster.id), Reservation)
    held = held_disks(cluster)

    marks = set_disk_state([held[0]], Disk.State.FAILED)
    assert [d.id for d in marks.changed] == [held[0]]
    event = AuditEvent.objects.get(action=A.DISK_FAIL, object_id=held[0])
    assert event.actor is None  # the system, here
    assert event.detail == {"previous": "allocated", "held_by": f"{cluster.name}/worker-0"}
    assert held_disks(cluster) == held  # the instance goes on with it

    release(cluster.id)
    states = dict(Disk.objects.filter(id__in=held).values_list("id", "state"))
    assert states == {held[0]: "failed", held[1]: "available"}


@pytest.mark.django_db
def test_only_a_disk_nobody_holds_becomes_available_again(alice):
    make_network()
    make_node(disks={"hdd": 2})
    cluster = make_cluster(alice, wants(1, disks=1))
    reserve(cluster.id)
    (held,) = held_disks(cluster)
    free = Disk.objects.exclude(id=held).get()
    set_disk_state([held, free.id], Disk.State.RETIRED)

    marks = set_disk_state([held, free.id], Disk.State.AVAILABLE)
    assert [d.id for d in marks.changed] == [free.id]
    assert marks.refused == [f"{Disk.objects.get(id=held)} is held by {cluster.name}/worker-0"]
    assert Disk.objects.get(id=held).state == "retired"
    assert not AuditEvent.objects.filter(action=A.DISK_AVAILABLE, object_id=held).exists()
    # Unchanged disks leave no row; "allocated" is the reservation's to set.
    assert not set_disk_state([free.id], Disk.State.AVAILABLE).changed
    assert AuditEvent.objects.filter(action=A.DISK_AVAILABLE).count() == 1
    with pytest.raises(ValueError, match="cannot be marked 'allocated'"):
        set_disk_state([free.id], Disk.State.ALLOCATED)


@pytest.mark.django_db(transaction=True)
def test_marks_racing_reservations_never_miss_a_holder(alice):
    """Reservations and an admin failing every disk of the node, all at once: each disk is
    either taken before the mark (and the audit row names its holder) or skipped by the
    reservations, so no failed disk is ever handed out afterwards."""
    make_network()
    Quota.objects.create(user=alice, max_clusters=8)
    node = make_node(cores=12, disks={"hdd": 8})
    clusters = [make_cluster(alice, wants(1, cores=1, memory_mb=512, disks=1)) for _ in range(8)]
    disk_ids = list(node.disks.values_list("id", flat=True))
    jobs = [lambda c=c: reserve(c.id) for c in clusters]

    def mark(disk_id, pause):
        time.sleep(pause)  # spread the marks over the reservations' run
        return set_disk_state([disk_id], Disk.State.FAILED)

    jobs += [functools.partial(mark, d, n * 0.004) for n, d in enumerate(disk_ids)]
    results = run_together(jobs)
    assert not [r for r in results if isinstance(r, Exception)], results

    assert Disk.objects.filter(id__in=disk_ids).exclude(state="failed").count() == 0
    events = {e.object_id: e.detail for e in AuditEvent.objects.filter(action=A.DISK_FAIL)}
    assert set(events) == set(disk_ids)
    placed = [c for c, r in zip(clusters, results, strict=False) if isinstance(r, Reservation)]
    holders = {held_disks(c)[0]: f"{c.name}/worker-0" for c in placed}
    # A disk taken after its mark would be held without its audit row naming the holder.
    for disk_id, detail in events.items():
        assert detail.get("held_by") == holders.get(disk_id), (disk_id, detail)
