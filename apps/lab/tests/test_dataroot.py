"""A lab node's Docker data-root is a file system with quotas on a loop device of its own (XFS
with pquota, or btrfs where the kernel has no XFS quotas), so a container's writable-layer
size limit really holds; taking the node down leaves no mount and no loop device. Proven on a
tiny lab's single daemon, next to the checkout's lab."""

import pytest
from django.conf import settings

from apps.lab import dataroot, host, lab
from apps.lab.daemons import local_node, start_dockerd, wait_for_dockerd
from apps.lab.image import build_base_image_tar, ensure_image
from apps.lab.nodes import lab_nodes
from apps.lab.teardown import stop_node
from apps.lab.tests.machine import machine_holds
from apps.lab.tests.test_cleanup import scratch, tiny  # noqa: F401  (fixtures)

pytestmark = pytest.mark.lab


def test_a_container_cannot_write_beyond_its_writable_layer_limit(tiny):  # noqa: F811
    spec = tiny(disks_per_node=0, ssd_per_node=0)
    node = lab_nodes(spec)[0]
    lab.ensure_pki(spec, [node])
    assert start_dockerd(node)
    wait_for_dockerd(node)
    _, mount_point = dataroot.paths(node)
    assert dataroot.describe(node) in ("xfs with project quotas", "btrfs with quota groups")
    if host.filesystem_type(mount_point) == "xfs":
        assert host.mount_options(mount_point) & {"pquota", "prjquota"}
    ensure_image(node, build_base_image_tar(spec.home))
    client = local_node(node)
    assert dataroot.writable_layer_limit(client) is None  # the probe the lab up logs

    # 16 MB of writable layer; 64 MB written outside any disk.
    code, output = client.run_helper(
        ["dd", "if=/dev/zero", "of=/fill", "bs=1M", "count=64"],
        [],
        image=settings.LAB_IMAGE,
        host_options={"storage_opt": {"size": "16m"}},
    )
    assert code != 0
    # XFS project quotas answer ENOSPC, btrfs quota groups EDQUOT.
    assert "No space left on device" in output or "Disk quota exceeded" in output, output
    # Without the limit the same write succeeds: it was the limit, not a small disk.
    code, output = client.run_helper(
        ["dd", "if=/dev/zero", "of=/fill", "bs=1M", "count=64"], [], image=settings.LAB_IMAGE
    )
    assert code == 0, output

    stop_node(node)  # what `lab up` undoes and a node's stop does
    assert host.mounted_device(mount_point) is None
    assert host.loop_devices_below(spec.home) == {}
    lab.teardown(spec, log=lambda line: None)
    assert machine_holds(spec) == []


def test_a_data_root_on_the_hosts_file_system_makes_way_for_one_with_quotas(tiny):  # noqa: F811
    """A node of a lab made before the data-roots were XFS: its old folder is replaced."""
    spec = tiny(disks_per_node=0, ssd_per_node=0)
    node = lab_nodes(spec)[0]
    _, mount_point = dataroot.paths(node)
    (mount_point / "image").mkdir(parents=True)
    (mount_point / "image" / "old").write_text("an older daemon's state")
    made = dataroot.ensure_data_root(node)
    try:
        assert host.filesystem_type(mount_point) in ("xfs", "btrfs")
        assert not (mount_point / "image").exists()
        assert dataroot.ensure_data_root(node) == []  # mounted already: nothing more to do
    finally:
        for _, undo in reversed(made):
            undo()
    dataroot.release_data_root(node)
    lab.teardown(spec, log=lambda line: None)
    assert machine_holds(spec) == []


@pytest.mark.django_db
def test_lab_up_gives_each_node_a_data_root_with_quotas_and_down_takes_it_away(tiny):  # noqa: F811
    spec = tiny(nodes=2)
    said: list[str] = []
    records = lab.up(log=said.append, spec=spec)
    # Each daemon was probed with a limited container, and the node's labels keep the answer.
    assert [record.labels[lab.LAYER_LABEL] for record in records] == ["enforced", "enforced"]
    kinds = ("xfs with project quotas", "btrfs with quota groups")
    assert all(row["data_root"] in kinds for row in lab.status(spec))
    assert sum(any(kind in line for kind in kinds) for line in said) == 2
    assert not any("cannot be enforced" in line for line in said)
    lab.up(log=said.append, spec=spec)  # again: reuses what runs, mounts nothing twice
    assert len(host.loop_devices_below(spec.home)) == 2 + 2 * spec.disks_per_node

    lab.down(log=said.append, spec=spec)
    assert machine_holds(spec) == []
