"""The physical pool: nodes, their disks, and the cluster network addresses come from."""

from django.conf import settings
from django.db import models


class Node(models.Model):
    class State(models.TextChoices):
        ACTIVE = "active"
        DRAINING = "draining"
        DOWN = "down"
        MAINTENANCE = "maintenance"

    name = models.SlugField(max_length=63, unique=True)
    # unix:///path, tcp://host:port (always mutual TLS) or ssh://user@host:port
    endpoint = models.CharField(max_length=255)
    # Folder holding ca.pem, cert.pem and key.pem for tcp:// nodes. Keys stay on disk, out of
    # the database, so they never show up in dumps, the admin or the API.
    tls_dir = models.CharField(max_length=255, blank=True)
    cores = models.PositiveIntegerField()
    memory_mb = models.PositiveIntegerField()
    state = models.CharField(max_length=16, choices=State.choices, default=State.ACTIVE)
    labels = models.JSONField(default=dict, blank=True)
    # Where the node mounts its data disks, one folder per disk.
    disk_root = models.CharField(max_length=255, blank=True)
    # Host interface the cluster network's macvlan hangs off.
    network_parent = models.CharField(max_length=15, blank=True)
    # Health as the reconciler sees it: consecutive failed checks, last answer, and whether
    # it (not an admin) marked the node down, so only then does an answer bring it back.
    failed_checks = models.PositiveIntegerField(default=0)
    last_seen = models.DateTimeField(null=True, blank=True)
    down_by_health_check = models.BooleanField(default=False)
    # Image references ("repo:tag") the node holds, as last listed by the reconciler (or the
    # lab): the catalog says at once when a version's image is on no node.
    images = models.JSONField(default=list, blank=True)
    created = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    @property
    def transport(self) -> str:
        return self.endpoint.split("://", 1)[0]


class Disk(models.Model):
    class Kind(models.TextChoices):
        HDD = "hdd", "HDD"
        SSD = "ssd", "SSD"
        NVME = "nvme", "NVMe"

    class State(models.TextChoices):
        AVAILABLE = "available"
        ALLOCATED = "allocated"
        BENCHMARKING = "benchmarking"  # out of the pool while fio writes to it
        FAILED = "failed"
        RETIRED = "retired"

    # No index of its own: disk_unique_mount_per_node (node, mount_path) serves lookups by node,
    # and every index here costs an entry each time a reservation flips a disk's state.
    node = models.ForeignKey(Node, on_delete=models.PROTECT, related_name="disks", db_index=False)
    mount_path = models.CharField(max_length=255)
    # Block device on the node; blkio throttles are set per device.
    device = models.CharField(max_length=255, blank=True)
    kind = models.CharField(max_length=8, choices=Kind.choices, default=Kind.HDD)
    capacity_bytes = models.BigIntegerField()
    state = models.CharField(max_length=16, choices=State.choices, default=State.AVAILABLE)
    # Bandwidth cap applied to every container using this disk (emulates a spindle); 0 = none.
    write_bps = models.BigIntegerField(default=0)
    read_bps = models.BigIntegerField(default=0)
    # Last fio benchmark (apps/inventory/benchmarks.py, Table 4 of the CESGA paper): sequential
    # 1 MiB bandwidth in MB/s, random 4 KiB IOPS at queue depth 1 and 64; empty until measured.
    seq_read_mbps = models.FloatField(null=True, blank=True)
    seq_write_mbps = models.FloatField(null=True, blank=True)
    rand_read_iops_qd1 = models.FloatField(null=True, blank=True)
    rand_write_iops_qd1 = models.FloatField(null=True, blank=True)
    rand_read_iops_qd64 = models.FloatField(null=True, blank=True)
    rand_write_iops_qd64 = models.FloatField(null=True, blank=True)
    measured_at = models.DateTimeField(null=True, blank=True)
    # Why the disk measured far below its siblings of the same kind; empty when it did not
    # (kept up to date by inventory.services.refresh_slow_flags after every benchmark).
    slow_reason = models.CharField(max_length=255, blank=True)

    BENCH_FIELDS = (
        "seq_read_mbps",
        "seq_write_mbps",
        "rand_read_iops_qd1",
        "rand_write_iops_qd1",
        "rand_read_iops_qd64",
        "rand_write_iops_qd64",
    )

    class Meta:
        ordering = ["node__name", "mount_path"]
        constraints = [
            models.UniqueConstraint(
                fields=["node", "mount_path"], name="disk_unique_mount_per_node"
            ),
        ]
        indexes = [
            # The scheduler counts and picks free disks per node and kind.
            models.Index(
                fields=["node", "kind"],
                name="disk_available_by_node_kind",
                condition=models.Q(state="available"),
            ),
        ]

    def __str__(self) -> str:
        return f"{self.node.name}:{self.mount_path}"


class Network(models.Model):
    """A cluster network spanning nodes (macvlan); the portal hands out its addresses.

    An isolated network is a segment of its own (a VLAN at a site, a bridge in the lab) that one
    cluster holds at a time: its containers reach each other and nobody else's. A shared one
    (not isolated) puts every cluster on one segment, for sites that isolate otherwise."""

    name = models.SlugField(max_length=63, unique=True)
    subnet = models.CharField(max_length=43, help_text="CIDR, e.g. 10.213.0.0/24")
    gateway = models.GenericIPAddressField(protocol="IPv4")
    first_address = models.GenericIPAddressField(protocol="IPv4")
    last_address = models.GenericIPAddressField(protocol="IPv4")
    isolated = models.BooleanField(
        default=False, help_text="one cluster at a time: a segment (VLAN) of its own"
    )
    # The macvlan's parent on every node: `parent` if set (the lab's bridge of this segment),
    # else the node's network_parent, as the 802.1q sub-interface `<parent>.<vlan>` when a VLAN
    # id is given (Docker creates that sub-interface itself).
    vlan = models.PositiveSmallIntegerField(null=True, blank=True, help_text="802.1q VLAN id")
    parent = models.CharField(max_length=15, blank=True)
    # Where the portal's proxy connects from on this network when it is not the portal host's
    # routed address (a lab segment's shim holds one beside the host's own): the perimeter
    # lets it in, and nothing else on the host (apps/clusters/perimeter.py).
    portal_source = models.GenericIPAddressField(protocol="IPv4", null=True, blank=True)
    # The cluster holding an isolated network (set and cleared by the reservation).
    holder = models.ForeignKey(
        "clusters.Cluster", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )

    class Meta:
        constraints = [
            models.CheckConstraint(
                condition=models.Q(holder__isnull=True) | models.Q(isolated=True),
                name="network_only_isolated_ones_are_held",
            ),
            models.CheckConstraint(
                condition=models.Q(vlan__isnull=True) | models.Q(vlan__gte=1, vlan__lte=4094),
                name="network_vlan_in_range",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.name} ({self.subnet})"

    @property
    def docker_name(self) -> str:
        """The network's name on every node (one Docker network per segment)."""
        base = settings.NODE_NETWORK_NAME
        return f"{base}-{self.name}" if self.isolated else base

    def parent_on(self, node: "Node") -> str:
        if self.parent:
            return self.parent
        if self.vlan:
            return f"{node.network_parent}.{self.vlan}"
        return node.network_parent


class Address(models.Model):
    """One address of a Network's range. Rows are generated from the range (see signals);
    `held` flips inside the reservation transaction, and the partial unique constraint on
    clusters.Instance.address is the backstop against handing it out twice."""

    network = models.ForeignKey(Network, on_delete=models.CASCADE, related_name="addresses")
    ip = models.GenericIPAddressField(protocol="IPv4")
    held = models.BooleanField(default=False)

    class Meta:
        ordering = ["network", "id"]
        constraints = [
            models.UniqueConstraint(fields=["network", "ip"], name="address_unique_per_network"),
        ]
        indexes = [
            models.Index(
                fields=["network", "id"],
                name="address_free_by_network",
                condition=models.Q(held=False),
            ),
        ]

    def __str__(self) -> str:
        return self.ip
