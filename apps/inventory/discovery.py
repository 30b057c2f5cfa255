"""Finding a node's data disks: what is mounted under its disk root, how big, and what kind.

A short-lived helper container mounts the node's disk root read-only and reports the mounts
below it (from its own mountinfo), their file system sizes and whether the kernel calls each
device rotational. Virtual and loop devices often claim to be rotational whatever they are, so
a `.platter-kind` file (hdd, ssd or nvme) at a disk's root overrides the kernel's answer.
"""

from dataclasses import dataclass, field
from pathlib import PurePosixPath

from django.db import transaction

from apps import nodes
from apps.inventory.models import Disk, Node
from apps.nodes import NodeError

KIND_FILE = ".platter-kind"
# Prints one line per fact: M (a mountinfo line), S (size), K (kind file), R (rotational).
PROBE = r"""
grep ' /disks/' /proc/self/mountinfo | sed 's/^/M /'
for d in /disks/*/; do
  d=${d%/}
  echo "S $d $(stat -f -c '%b %S' "$d")"
  [ -f "$d/KIND_FILE" ] && echo "K $d $(head -c 8 "$d/KIND_FILE")"
done
for f in /sys/dev/block/*; do
  r=$(cat "$f/queue/rotational" 2>/dev/null || cat "$f/../queue/rotational" 2>/dev/null)
  echo "R ${f##*/} $r"
done
true
""".replace("KIND_FILE", KIND_FILE)


@dataclass(frozen=True)
class FoundDisk:
    name: str  # folder under the disk root
    device: str
    capacity_bytes: int
    kind: str


@dataclass
class DiscoveryReport:
    created: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)


def parse_probe(output: str) -> list[FoundDisk]:
    """The disks in the helper's output: mounts directly under /disks, with size and kind."""
    mounts: dict[str, tuple[str, str]] = {}  # name -> (major:minor, source device)
    sizes: dict[str, int] = {}
    kinds: dict[str, str] = {}
    rotational: dict[str, str] = {}
    for line in output.splitlines():
        tag, _, rest = line.partition(" ")
        if tag == "M":
            fields = rest.split()
            if " - " not in rest or len(fields) < 5:
                continue
            mount_point = PurePosixPath(fields[4])
            if mount_point.parent != PurePosixPath("/disks"):
                continue  # deeper mounts are not disks of their own
            source = rest.split(" - ", 1)[1].split()
            mounts[mount_point.name] = (fields[2], source[1] if len(source) > 1 else "")
        elif tag == "S":
            parts = rest.split()
            if len(parts) == 3 and parts[1].isdigit() and parts[2].isdigit():
                sizes[PurePosixPath(parts[0]).name] = int(parts[1]) * int(parts[2])
        elif tag == "K":
            parts = rest.split()
            if len(parts) == 2 and parts[1].lower() in Disk.Kind.values:
                kinds[PurePosixPath(parts[0]).name] = parts[1].lower()
        elif tag == "R":
            parts = rest.split()
            if len(parts) == 2:
                rotational[parts[0]] = parts[1]
    found = []
    for name, (major_minor, device) in sorted(mounts.items()):
        kind = kinds.get(name) or _kind_from_kernel(device, rotational.get(major_minor))
        found.append(FoundDisk(name, device, sizes.get(name, 0), kind))
    return found


def _kind_from_kernel(device: str, rotational: str | None) -> str:
    if rotational == "0":
        return Disk.Kind.NVME if "nvme" in device else Disk.Kind.SSD
    return Disk.Kind.HDD


def probe(node: Node) -> list[FoundDisk]:
    if not node.disk_root:
        raise NodeError(node.name, "has no disk root set; set it in the admin first", False)
    helper = nodes.client(node).run_helper
    code, output = helper(["sh", "-c", PROBE], [f"{node.disk_root}:/disks:ro"])
    if code != 0:
        raise NodeError(node.name, f"disk probe failed: {output.strip()[-300:]}", False)
    return parse_probe(output)


@transaction.atomic
def record(node: Node, found: list[FoundDisk]) -> DiscoveryReport:
    """Create or update the node's Disk rows; disks no longer mounted are reported, not
    removed (an admin decides whether they failed or were retired)."""
    report = DiscoveryReport()
    seen = set()
    for disk in found:
        mount_path = str(PurePosixPath(node.disk_root) / disk.name)
        seen.add(mount_path)
        _, created = Disk.objects.update_or_create(
            node=node,
            mount_path=mount_path,
            defaults={
                "device": disk.device,
                "capacity_bytes": disk.capacity_bytes,
                "kind": disk.kind,
            },
        )
        (report.created if created else report.updated).append(mount_path)
    others = Disk.objects.filter(node=node).exclude(mount_path__in=seen)
    report.missing = sorted(
        others.exclude(state=Disk.State.RETIRED).values_list("mount_path", flat=True)
    )
    return report


def discover(node: Node) -> DiscoveryReport:
    return record(node, probe(node))
