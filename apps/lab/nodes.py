"""What one lab is on this machine: its folders, addresses, names and subnets, and its nodes.

A LabSpec names everything a lab holds, so two labs whose homes, addresses and segment subnets
differ run side by side (a test builds a tiny one next to the checkout's). The checkout's own lab
comes from the settings (LabSpec.from_settings); everything else takes a spec.
"""

from dataclasses import dataclass, field, replace
from pathlib import Path

from django.conf import settings

from apps.inventory.models import Disk
from apps.lab.place import DEFAULT as FIRST_PLACE
from apps.lab.place import lab_key

DOCKER_TLS_PORT = 2376
SSH_PORT = 2222
RUN_ROOT = Path("/run/platter")  # unix socket paths must stay under 108 bytes: short folders


@dataclass(frozen=True)
class LabSpec:
    home: Path  # state: certificates, disk images, the daemons' data roots
    key: str  # short id in link names and the /run folder; unique per lab on this machine
    address_prefix: str = FIRST_PLACE.address_prefix
    nodes: int = 3
    ssh_node: bool = True
    disks_per_node: int = 6
    disk_size_mb: int = 1024
    disk_fs: str = "ext4"
    ssd_per_node: int = 2
    disk_bps_mb: int = 0
    data_root_mb: int = 32768  # each daemon's XFS data-root (a sparse file: used space only)
    segments_subnet: str = FIRST_PLACE.segments_subnet
    segments_per_slot: int = 8
    slots: int = 8  # portal slots (dev portal, parallel test runs) sharing the lab's segments
    products: tuple[str, ...] = field(default=())

    @classmethod
    def from_settings(cls) -> "LabSpec":
        """The checkout's lab: under STATE_DIR, named after it (as labs always were)."""
        return cls(
            home=settings.STATE_DIR / "lab",
            key=lab_key(settings.STATE_DIR),
            address_prefix=settings.LAB_ADDRESS_PREFIX,
            nodes=settings.LAB_NODES,
            ssh_node=settings.LAB_SSH_NODE,
            disks_per_node=settings.LAB_DISKS_PER_NODE,
            disk_size_mb=settings.LAB_DISK_SIZE_MB,
            disk_fs=settings.LAB_DISK_FS,
            ssd_per_node=settings.LAB_SSD_PER_NODE,
            disk_bps_mb=settings.LAB_DISK_BPS_MB,
            segments_subnet=settings.LAB_SEGMENTS_SUBNET,
            segments_per_slot=settings.LAB_SEGMENTS_PER_SLOT,
            products=tuple(settings.LAB_PRODUCTS),
        )

    @classmethod
    def at(cls, home: Path, **fields) -> "LabSpec":
        """A lab of its own under `home` (e.g. a test's), named after that folder."""
        return cls(home=home, key=lab_key(home), **fields)

    def but(self, **fields) -> "LabSpec":
        return replace(self, **fields)

    @property
    def run_dir(self) -> Path:
        return RUN_ROOT / self.key

    @property
    def bridge(self) -> str:
        """The flat network's bridge (bench/ baselines), parent of each node's macvlan."""
        return f"plab{self.key}"

    @property
    def link_prefix(self) -> str:
        """Segment bridges and shims are named <prefix>sNN and <prefix>hNN."""
        return f"pl{self.key[:6]}"

    def address(self, number: int) -> str:
        return f"{self.address_prefix}{number}"

    @property
    def addresses(self) -> list[str]:
        return [node.address for node in lab_nodes(self)]


def current() -> LabSpec:
    return LabSpec.from_settings()


def checkout_id() -> str:
    """Short id of this checkout, so two checkouts on one machine never share names."""
    return current().key


def state_dir() -> Path:
    return current().home


def run_dir() -> Path:
    return current().run_dir


def bridge_name() -> str:
    return current().bridge


@dataclass(frozen=True)
class LabNode:
    name: str
    address: str
    over_ssh: bool = False
    spec: LabSpec = field(default_factory=current, compare=False, repr=False)

    @property
    def home(self) -> Path:
        return self.spec.home / "nodes" / self.name

    @property
    def disk_root(self) -> Path:
        return self.home / "disks"

    @property
    def exec_root(self) -> Path:
        return self.spec.run_dir / self.name

    @property
    def socket(self) -> Path:
        return self.exec_root / "docker.sock"

    @property
    def pidfile(self) -> Path:
        return self.exec_root / "dockerd.pid"

    @property
    def tls_dir(self) -> Path:
        """The portal's client certificate for this node (with the CA that signed the node)."""
        return self.spec.home / "pki" / "client"

    @property
    def endpoint(self) -> str:
        if self.over_ssh:
            return f"ssh://root@{self.address}:{SSH_PORT}"
        return f"tcp://{self.address}:{DOCKER_TLS_PORT}"

    def disk_paths(self, index: int) -> tuple[Path, Path]:
        """(backing image file, mount point) of disk number index (1-based)."""
        return self.home / "images" / f"disk{index}.img", self.disk_root / f"disk{index}"


def lab_nodes(spec: LabSpec | None = None) -> list[LabNode]:
    spec = spec or current()
    nodes = [LabNode(f"lab-{i}", spec.address(i), spec=spec) for i in range(1, spec.nodes + 1)]
    if spec.ssh_node:
        nodes.append(LabNode("lab-ssh", spec.address(spec.nodes + 1), over_ssh=True, spec=spec))
    return nodes


def disk_kind(index: int, spec: LabSpec | None = None) -> str:
    """The last ssd_per_node disks of each node are called SSDs, the rest HDDs."""
    spec = spec or current()
    first_ssd = spec.disks_per_node - spec.ssd_per_node + 1
    return Disk.Kind.SSD if index >= first_ssd else Disk.Kind.HDD
