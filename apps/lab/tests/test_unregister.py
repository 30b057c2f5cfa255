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
    node = Node.objects.create(
        name="lab-9", endpoint="tcp://127.0.1.9:2376", cores=4, memory_mb=8192
    )
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


@pytest.mark.django_db
def test_lab_up_again_puts_the_disks_lab_down_retired_back_in_the_pool(tmp_path, monkeypatch):
    """./platter lab down, then up (./platter run does both) on a database with cluster
    history: the lab's disks were retired; mounted again they are available, or every launch
    would be refused (never_fits)."""
    from apps.lab.nodes import LabSpec, lab_nodes

    spec = LabSpec.at(tmp_path / "lab", nodes=1, ssh_node=False, disks_per_node=1)
    node = lab_nodes(spec)[0]
    mount = tmp_path / "disk1"
    mount.mkdir()
    (tmp_path / "lab").mkdir()
    monkeypatch.setattr(lab, "register_segments", lambda spec: None)  # not this test's subject
    monkeypatch.setattr(lab, "node_images", lambda _node: [])  # no daemon runs here
    record = Node.objects.create(name=node.name, endpoint=node.endpoint, cores=2, memory_mb=4096)
    disk = Disk.objects.create(
        node=record, mount_path=str(mount), capacity_bytes=10**9, state=Disk.State.RETIRED
    )
    lab.register(node, [(1, "/dev/loop99", mount)])
    disk.refresh_from_db()
    assert disk.state == Disk.State.AVAILABLE
