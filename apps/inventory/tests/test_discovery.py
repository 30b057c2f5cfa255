"""Disk discovery: parsing the probe's report, and a real probe of the lab's nodes."""

import pytest
from django.core.management import CommandError, call_command

from apps.inventory.discovery import FoundDisk, discover, parse_probe
from apps.inventory.models import Disk, Node

PROBE_OUTPUT = """\
M 144 143 7:0 / /disks/disk1 rw,relatime - ext4 /dev/loop0 rw
M 145 143 259:1 / /disks/fast rw,relatime - xfs /dev/nvme0n1p1 rw
M 146 145 8:17 / /disks/fast/nested rw,relatime - ext4 /dev/sdb1 rw
M 147 143 8:33 / /disks/virtual rw,relatime - ext4 /dev/sdc1 rw
S /disks/disk1 249195 4096
S /disks/fast 1000 4096
S /disks/virtual 10 1024
K /disks/virtual ssd
R 7:0 1
R 259:1 0
R 8:33 1
"""


def test_the_probe_report_gives_mounts_sizes_and_kinds():
    assert parse_probe(PROBE_OUTPUT) == [
        FoundDisk("disk1", "/dev/loop0", 249195 * 4096, "hdd"),
        FoundDisk("fast", "/dev/nvme0n1p1", 1000 * 4096, "nvme"),
        FoundDisk("virtual", "/dev/sdc1", 10 * 1024, "ssd"),  # the kind file wins
    ]


def test_garbage_lines_are_ignored():
    assert parse_probe("M broken\nS /disks/x notanumber 1\nK /disks/x floppy\nhello\n") == []


@pytest.mark.django_db
def test_discovery_on_a_lab_node_finds_what_the_lab_mounted(lab_inventory):
    node = Node.objects.get(name="lab-1")
    before = {d.mount_path: (d.device, d.kind, d.capacity_bytes) for d in node.disks.all()}
    Disk.objects.filter(node=node, mount_path__endswith="disk6").delete()
    Disk.objects.create(node=node, mount_path="/nowhere/disk9", kind="hdd", capacity_bytes=1)

    report = discover(node)

    assert len(report.created) == 1 and report.created[0].endswith("disk6")
    assert len(report.updated) == 5
    assert report.missing == ["/nowhere/disk9"]
    after = {d.mount_path: (d.device, d.kind, d.capacity_bytes) for d in node.disks.all()}
    after.pop("/nowhere/disk9")
    assert after == before


@pytest.mark.django_db
def test_discovery_runs_over_ssh_from_the_command_line(lab_inventory, capsys):
    call_command("discover_disks", "lab-ssh")
    assert "updated: 6" in capsys.readouterr().out
    with pytest.raises(CommandError, match="no node named 'nope'"):
        call_command("discover_disks", "nope")
