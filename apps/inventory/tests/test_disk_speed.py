"""Disk benchmark results: storing them, the kind they suggest, and flagging slow disks."""

import pytest
from django.contrib.auth import get_user_model

from apps.inventory import services
from apps.inventory.models import Disk, Node

FAST = {
    "seq_read_mbps": 200.0,
    "seq_write_mbps": 180.0,
    "rand_read_iops_qd1": 150.0,
    "rand_write_iops_qd1": 300.0,
    "rand_read_iops_qd64": 400.0,
    "rand_write_iops_qd64": 500.0,
}


@pytest.fixture
def node(db):
    return Node.objects.create(name="n1", endpoint="unix:///x", cores=4, memory_mb=1024)


def make_disks(node, count, kind=Disk.Kind.HDD, prefix="d"):
    return [
        Disk.objects.create(
            node=node, mount_path=f"/disks/{prefix}{i}", kind=kind, capacity_bytes=1
        )
        for i in range(count)
    ]


def test_it_stores_results_and_when_they_were_taken(node):
    disk = make_disks(node, 1)[0]
    services.record_benchmark(disk.id, FAST)
    disk.refresh_from_db()
    assert {f: getattr(disk, f) for f in Disk.BENCH_FIELDS} == FAST
    assert disk.measured_at is not None and disk.kind == Disk.Kind.HDD


@pytest.mark.parametrize(
    ("iops", "current", "expected"),
    [(150, "hdd", "hdd"), (150, "ssd", "hdd"), (20_000, "hdd", "ssd"), (20_000, "nvme", "nvme")],
)
def test_the_kind_follows_random_read_iops_when_asked(node, iops, current, expected):
    disk = make_disks(node, 1, kind=current)[0]
    services.record_benchmark(disk.id, {**FAST, "rand_read_iops_qd1": iops}, set_kind=True)
    disk.refresh_from_db()
    assert disk.kind == expected


def test_a_disk_far_below_the_median_of_its_kind_is_flagged(node, settings):
    settings.DISK_SLOW_PERCENT = 50
    hdds = make_disks(node, 4)
    ssds = make_disks(node, 2, kind=Disk.Kind.SSD, prefix="s")
    for disk in hdds[:3]:
        services.record_benchmark(disk.id, FAST)
    services.record_benchmark(hdds[3].id, {**FAST, "seq_read_mbps": 60.0})  # failing spindle
    # SSDs are compared only with SSDs: far faster than the HDDs, yet not flagged
    for disk in ssds:
        services.record_benchmark(disk.id, {k: v * 100 for k, v in FAST.items()})

    assert services.refresh_slow_flags() == 1

    flagged = Disk.objects.exclude(slow_reason="")
    assert [d.id for d in flagged] == [hdds[3].id]
    assert flagged[0].slow_reason == "seq read MB/s 60 < 50% of median 200"


def test_siblings_on_other_nodes_count_only_in_pool_scope(node):
    other = Node.objects.create(name="n2", endpoint="unix:///y", cores=4, memory_mb=1024)
    for disk in make_disks(node, 2):
        services.record_benchmark(disk.id, FAST)
    lonely = make_disks(other, 1)[0]
    services.record_benchmark(lonely.id, {**FAST, "rand_write_iops_qd64": 10.0})
    disks = list(Disk.objects.all())

    assert services.slow_disk_reasons(disks, 50, scope="node") == {}
    assert list(services.slow_disk_reasons(disks, 50, scope="pool")) == [lonely.id]


def test_the_admin_lists_and_filters_slow_disks(node, client):
    admin = get_user_model().objects.create_superuser("root", "root@example.org", "pw-123-abc")
    client.force_login(admin)
    disks = make_disks(node, 3)
    for disk in disks[:2]:
        services.record_benchmark(disk.id, FAST)
    services.record_benchmark(disks[2].id, {**FAST, "seq_write_mbps": 1.0})
    services.refresh_slow_flags()

    page = client.get("/admin/inventory/disk/?speed=slow")
    assert page.status_code == 200
    assert disks[2].mount_path in page.text and disks[0].mount_path not in page.text
    assert "200 / 180" in client.get("/admin/inventory/disk/").text
