"""Per-disk bandwidth caps reach the kernel's blkio throttle of a real container."""

import os
import uuid
from pathlib import Path

from django.conf import settings

from apps.inventory.models import Disk
from apps.nodes import engine
from apps.nodes.specs import throttle_options


def test_it_builds_no_throttle_for_uncapped_disks():
    disk = Disk(device="/dev/loop0", write_bps=0, read_bps=0)
    assert throttle_options([disk]) == {}


def test_it_caps_reads_and_writes_per_device():
    disk = Disk(device="/dev/loop3", write_bps=10_000_000, read_bps=20_000_000)
    assert throttle_options([disk]) == {
        "device_write_bps": [{"Path": "/dev/loop3", "Rate": 10_000_000}],
        "device_read_bps": [{"Path": "/dev/loop3", "Rate": 20_000_000}],
    }


def test_a_capped_lab_disk_is_throttled_in_the_containers_blkio_cgroup(lab_inventory):
    node = next(n for n in lab_inventory if n.endpoint.startswith("tcp://"))
    disk = node.disks.first()
    disk.write_bps = 8 * 1024 * 1024
    client = engine.cached(node)
    container = client.containers.run(
        settings.LAB_IMAGE,
        ["sleep", "30"],
        name=f"throttle-{uuid.uuid4().hex[:8]}",
        volumes={disk.mount_path: {"bind": "/data/1", "mode": "rw"}},
        network_mode="none",
        detach=True,
        **throttle_options([disk]),
    )
    try:
        rdev = os.stat(disk.device).st_rdev
        expected = f"{os.major(rdev)}:{os.minor(rdev)} {disk.write_bps}"
        matches = list(
            Path("/sys/fs/cgroup/blkio").rglob(f"*{container.id}*/blkio.throttle.write_bps_device")
        )
        assert matches, "no blkio cgroup found for the container"
        assert expected in matches[0].read_text()
    finally:
        container.remove(force=True)
