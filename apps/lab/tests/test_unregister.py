import pytest

from apps.audit.models import AuditEvent
from apps.clusters import reservation
from apps.clusters.tests.factories import make_cluster, make_network, wants
from apps.inventory.models import Disk, Node
from apps.lab import lab


@pytest.mark.django_db
def test_lab_down_removes_unused_inventory_rows():
    Node.objects.create(name="lab-9", endpoint="tcp://127.0.1.9:2376", cores=2, memory_mb=1024)
    assert lab.unregister(["lab-9"]) == "inventory rows removed"
    assert not Node.objects.filter(name="lab-9").exists()


@pytest.mark.django_db
def test_lab_down_keeps_rows_that_cluster_history_points_at(alice):
    make_network()
    node = Node.objects.create(name="lab-9", endpoint="tcp://127.0.1.9:2376", cores=4,
                               memory_mb=8192)  # fmt: skip
    Disk.objects.create(node=node, mount_path="/d/1", capacity_bytes=10**9)
    cluster = make_cluster(alice, wants(1, cores=1, memory_mb=512, disks=1))
    assert isinstance(reservation.reserve(cluster.id), reservation.Reservation)

    message = lab.unregister(["lab-9"])

    assert "kept" in message
    node.refresh_from_db()
    assert node.state == Node.State.DOWN
    assert set(node.disks.values_list("state", flat=True)) == {Disk.State.RETIRED}
    # Audited as the system's marks, the retired disk naming the instance still holding it.
    events = AuditEvent.objects.filter(actor=None).order_by("id")
    assert [(e.action, e.object_repr) for e in events] == [
        (AuditEvent.Action.NODE_DOWN, str(node)),
        (AuditEvent.Action.DISK_RETIRE, str(node.disks.get())),
    ]
    assert events[1].detail["held_by"] == f"{cluster.name}/{cluster.instances.get().hostname}"
