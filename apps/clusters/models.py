"""Clusters, their instances, and the disks and addresses instances hold.

What an instance holds is recorded on rows with an `active` flag; partial unique constraints
make a second active holder of a disk or an address fail loudly instead of double-booking.
"""

from typing import TYPE_CHECKING

from django.conf import settings
from django.db import models
from django.utils.functional import cached_property

from . import states

if TYPE_CHECKING:
    from apps.catalog.models import ProductVersion


class ClusterQuerySet(models.QuerySet):
    def visible_to(self, user) -> "ClusterQuerySet":
        """The one access rule of the API, the UI proxy, CESGA's API, jobs and usage: a user
        sees and acts on their own clusters, staff on everyone's. Anything else answers 404,
        so nobody learns which ids exist."""
        return self if user.is_staff else self.filter(owner=user)


class Cluster(models.Model):
    State = states.State  # what each state means: apps/clusters/states.py

    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="clusters"
    )
    version = models.ForeignKey(
        "catalog.ProductVersion", on_delete=models.PROTECT, related_name="clusters"
    )
    # The version's definition as it launched: starts, resumes and re-placements build the
    # containers from it, never from the version as edited since. Empty only on clusters made
    # before revisions existed and missed by migration 0008.
    revision = models.ForeignKey(
        "catalog.ProductRevision",
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="clusters",
    )
    name = models.SlugField(max_length=63)
    options = models.JSONField(default=dict, blank=True)
    state = models.CharField(max_length=16, choices=State.choices, default=State.QUEUED)
    reason = models.TextField(blank=True, help_text="Why it failed or why it waits")
    # Place every instance on the same node and disks as this destroyed cluster's instances.
    reuse_data_of = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    expires_at = models.DateTimeField(null=True, blank=True, help_text="Lease end")
    # Nodes that failed while this cluster was being placed; re-placement avoids them.
    avoid_nodes = models.JSONField(default=list, blank=True)
    placement_attempts = models.PositiveSmallIntegerField(default=0)
    # Set when a destroy asks to wipe the data, so a retried or resumed destroy knows.
    wipe_data = models.BooleanField(default=False)
    # Idle stop (idle.py): stopped, data kept, after this long unused (none: the owner's
    # group default, if any); when it was last used, by what, and when the owner was warned.
    idle_limit_minutes = models.PositiveIntegerField(null=True, blank=True)
    active_at = models.DateTimeField(null=True, blank=True)
    active_signal = models.CharField(max_length=120, blank=True, default="", db_default="")
    idle_warned_at = models.DateTimeField(null=True, blank=True)
    # The size a resize asked for (instances of the product's scalable role), kept until it
    # ends so a resumed resize knows its target (apps/clusters/resize.py).
    resize_to = models.PositiveIntegerField(null=True, blank=True)
    # A vertical resize under way (apps/clusters/vertical.py): the role, the asked cores and
    # memory, and each instance's figures before it, kept until it ends so a resumed or failed
    # change knows both ends.
    reshape = models.JSONField(null=True, blank=True)
    # The perimeter (apps/clusters/perimeter.py): sources (IPv4 CIDRs) the owner lets reach
    # the cluster's ports directly, besides its members, the portal and the site's own ranges.
    allowed_sources = models.JSONField(default=list, blank=True)
    # One timestamp per transition (the latest one; ClusterEvent keeps the whole history).
    created = models.DateTimeField(auto_now_add=True)
    placing_at = models.DateTimeField(null=True, blank=True)
    configuring_at = models.DateTimeField(null=True, blank=True)
    running_at = models.DateTimeField(null=True, blank=True)
    resizing_at = models.DateTimeField(null=True, blank=True)
    degraded_at = models.DateTimeField(null=True, blank=True)
    stopping_at = models.DateTimeField(null=True, blank=True)
    stopped_at = models.DateTimeField(null=True, blank=True)
    destroying_at = models.DateTimeField(null=True, blank=True)
    destroyed_at = models.DateTimeField(null=True, blank=True)
    failed_at = models.DateTimeField(null=True, blank=True)

    objects = ClusterQuerySet.as_manager()

    class Meta:
        ordering = ["-created"]
        constraints = [
            # A destroyed cluster frees its name; a failed one still shows in its owner's list.
            models.UniqueConstraint(
                fields=["owner", "name"],
                condition=~models.Q(state="destroyed"),
                name="cluster_unique_name_per_owner",
            ),
        ]
        indexes = [
            models.Index(
                fields=["created"], name="cluster_queue", condition=models.Q(state="queued")
            ),
            models.Index(fields=["owner", "state"], name="cluster_owner_state"),
        ]

    def __str__(self) -> str:
        return f"{self.name} ({self.state})"

    @cached_property
    def definition(self) -> "ProductVersion":
        """The product definition this cluster runs: its revision's, with the version's live
        access fields (an unsaved ProductVersion; the version itself for a cluster without a
        revision)."""
        from apps.catalog.revisions import definition_of

        if self.revision is None:
            return self.version
        return definition_of(self.revision, self.version)


# States in which a cluster counts against its owner's quota of clusters.
LIVE_STATES = [str(state) for state in states.LIVE]


class Instance(models.Model):
    class State(models.TextChoices):
        PENDING = "pending"
        RESERVED = "reserved"
        RUNNING = "running"
        LOST = "lost"
        STOPPED = "stopped"
        RELEASED = "released"

    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="instances")
    role = models.CharField(max_length=32)
    index = models.PositiveIntegerField()
    hostname = models.CharField(max_length=63, blank=True)
    cores = models.PositiveIntegerField()
    memory_mb = models.PositiveIntegerField()
    disks = models.PositiveIntegerField(help_text="Number of whole disks")
    disk_kind = models.CharField(max_length=8, default="hdd")
    image = models.CharField(max_length=255, blank=True)
    node = models.ForeignKey(
        "inventory.Node", null=True, blank=True, on_delete=models.PROTECT, related_name="instances"
    )
    address = models.ForeignKey(
        "inventory.Address", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    # True while the instance holds cores and memory on `node` and its address.
    active = models.BooleanField(default=False)
    container_id = models.CharField(max_length=80, blank=True)
    state = models.CharField(max_length=16, choices=State.choices, default=State.PENDING)
    # Times the reconciler started the container again after it stopped on its own since the
    # cluster last started (Docker's own restarts of a crash come first and are not counted).
    restarts = models.PositiveSmallIntegerField(default=0, db_default=0)
    # When its web service last answered the reconciler's readiness probe since its container
    # started (a notebook's JupyterLab /api/status); cleared when it stops or is lost.
    answered_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["cluster", "role", "index"]
        constraints = [
            models.UniqueConstraint(
                fields=["cluster", "role", "index"], name="instance_unique_role_index"
            ),
            models.UniqueConstraint(
                fields=["address"],
                condition=models.Q(active=True),
                name="instance_one_active_holder_per_address",
            ),
            models.CheckConstraint(
                condition=models.Q(active=False) | models.Q(node__isnull=False),
                name="instance_active_has_node",
            ),
        ]
        indexes = [
            models.Index(
                fields=["node"], name="instance_active_by_node", condition=models.Q(active=True)
            ),
        ]

    def __str__(self) -> str:
        return self.hostname or f"{self.role}-{self.index}"


class ResourceChange(models.Model):
    """An instance's cores and memory changed by a vertical resize (vertical.py), from `at` on:
    usage counts each stretch of the instance's membership at the figures it held then."""

    instance = models.ForeignKey(Instance, on_delete=models.CASCADE, related_name="changes")
    at = models.DateTimeField()
    cores_before = models.PositiveIntegerField()
    memory_mb_before = models.PositiveIntegerField()
    cores = models.PositiveIntegerField()
    memory_mb = models.PositiveIntegerField()

    class Meta:
        ordering = ["instance", "at", "id"]

    def __str__(self) -> str:
        return (
            f"{self.instance}: {self.cores_before} -> {self.cores} cores, "
            f"{self.memory_mb_before} -> {self.memory_mb} MB at {self.at:%Y-%m-%d %H:%M}"
        )


class ScalingPolicy(models.Model):
    """A cluster's autoscaling policy (apps/clusters/autoscale.py), with Dataproc's fields: every
    cooldown, the pending work its plugin reports, averaged, decides a resize within
    [min_workers, max_workers] through the resize path."""

    cluster = models.OneToOneField(Cluster, on_delete=models.CASCADE, related_name="scaling_policy")
    min_workers = models.PositiveIntegerField()
    max_workers = models.PositiveIntegerField()
    cooldown_seconds = models.PositiveIntegerField(default=120)
    scale_up_factor = models.FloatField(default=1.0)
    scale_down_factor = models.FloatField(default=1.0)
    min_change = models.PositiveIntegerField(default=1)
    decommission_timeout_seconds = models.PositiveIntegerField(default=600)
    created = models.DateTimeField(auto_now_add=True)
    # The cooldown runs from the last decision (or from the policy's creation); its words.
    decided_at = models.DateTimeField(null=True, blank=True)
    decision = models.CharField(max_length=300, blank=True, default="")

    class Meta:
        constraints = [
            models.CheckConstraint(
                condition=models.Q(min_workers__lte=models.F("max_workers")),
                name="scaling_min_at_most_max",
            ),
            models.CheckConstraint(
                condition=models.Q(scale_up_factor__gte=0, scale_up_factor__lte=1)
                & models.Q(scale_down_factor__gte=0, scale_down_factor__lte=1),
                name="scaling_factors_within_0_1",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.cluster}: {self.min_workers}-{self.max_workers} workers"


class GroupScaling(models.Model):
    """What a quota group's staff decide for its members' autoscaling: a default policy their
    new Hadoop and Spark clusters get (default_min_workers and default_max_workers both set),
    and the most workers any member's policy may reach."""

    group = models.OneToOneField("auth.Group", on_delete=models.CASCADE, related_name="scaling")
    max_workers = models.PositiveIntegerField(
        null=True, blank=True, help_text="No member's policy may reach more workers (empty: any)"
    )
    default_min_workers = models.PositiveIntegerField(null=True, blank=True)
    default_max_workers = models.PositiveIntegerField(null=True, blank=True)
    default_cooldown_seconds = models.PositiveIntegerField(default=120)
    default_scale_down_factor = models.FloatField(default=1.0)

    class Meta:
        verbose_name_plural = "group scaling"

    def __str__(self) -> str:
        return f"{self.group}: autoscaling defaults and limits"


class LoadSample(models.Model):
    """One reading of a cluster's pending work by its plugin (autoscale.Load)."""

    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="load_samples")
    at = models.DateTimeField()
    pending = models.FloatField()
    available = models.FloatField()
    per_worker = models.FloatField()
    unit = models.CharField(max_length=16)

    class Meta:
        indexes = [models.Index(fields=["cluster", "at"], name="load_sample_by_cluster_at")]

    def __str__(self) -> str:
        return f"{self.cluster_id} at {self.at:%H:%M:%S}: pending {self.pending} {self.unit}"


class DiskAllocation(models.Model):
    disk = models.ForeignKey("inventory.Disk", on_delete=models.PROTECT, related_name="allocations")
    instance = models.ForeignKey(Instance, on_delete=models.PROTECT, related_name="allocations")
    active = models.BooleanField(default=True)
    # Set when released with its data kept; cleared when the disk goes to someone else.
    data_kept = models.BooleanField(default=False)
    # Another cluster took the disk while this data was kept: the folder is wiped before that
    # cluster's containers start (workers/lifecycle.py), then this goes back to False.
    handed_over = models.BooleanField(default=False, db_default=False)
    created = models.DateTimeField(auto_now_add=True)
    released = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created"]
        constraints = [
            models.UniqueConstraint(
                fields=["disk"],
                condition=models.Q(active=True),
                name="disk_one_active_allocation",
            ),
            models.UniqueConstraint(
                fields=["disk"],
                condition=models.Q(data_kept=True),
                name="disk_one_kept_dataset",
            ),
        ]
        indexes = [
            models.Index(
                fields=["instance"],
                name="allocation_active_by_instance",
                condition=models.Q(active=True),
            ),
        ]

    def __str__(self) -> str:
        return f"{self.disk} -> {self.instance}"

    @property
    def holder(self) -> str:
        """Who holds (or kept data on) the disk, as the admin and the audit name it."""
        return f"{self.instance.cluster.name}/{self.instance}"


class ClusterEvent(models.Model):
    class Level(models.TextChoices):
        INFO = "info"
        WARNING = "warning"
        ERROR = "error"

    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="events")
    at = models.DateTimeField(auto_now_add=True, db_index=True)
    level = models.CharField(max_length=8, choices=Level.choices, default=Level.INFO)
    message = models.TextField()
    # The state the cluster entered, on the events of its transitions (blank on the others):
    # the cluster's life as a timeline, which usage accounting (apps.usage) reads.
    state = models.CharField(max_length=16, blank=True, default="", db_default="")

    class Meta:
        ordering = ["at", "id"]
        indexes = [
            models.Index(
                fields=["cluster", "at"],
                condition=~models.Q(state=""),
                name="clusterevent_transitions",
            )
        ]

    def __str__(self) -> str:
        return f"{self.at:%H:%M:%S} {self.level}: {self.message}"


class ClusterCredentials(models.Model):
    """The secrets a cluster's products require (made by apps.clusters.credentials).

    Kept readable, not hashed: the owner is shown them to connect, and every container of the
    cluster is given them at create time. Never put them in events, logs or messages."""

    cluster = models.OneToOneField(Cluster, on_delete=models.CASCADE, related_name="credentials")
    username = models.CharField(max_length=63)
    password = models.CharField(max_length=128)
    # Shared by the cluster's own daemons (Spark's authenticate secret, MongoDB's key file).
    secret = models.CharField(max_length=128)
    # The token a web UI that authenticates (JupyterLab) requires; only the portal's proxy
    # sends it (apps/proxy), never the owner: no page, API or event shows it.
    ui_token = models.CharField(max_length=128, blank=True, default="")
    created = models.DateTimeField(auto_now_add=True)

    class Meta:
        verbose_name_plural = "cluster credentials"

    def __str__(self) -> str:
        return f"credentials of {self.cluster_id}"

    def __repr__(self) -> str:
        return f"<ClusterCredentials cluster={self.cluster_id} username={self.username!r}>"


class IdlePolicy(models.Model):
    """A quota group's default idle limit: its members' clusters without a limit of their own
    stop after this long unused (the smallest of their groups' defaults applies)."""

    group = models.OneToOneField("auth.Group", on_delete=models.CASCADE, related_name="idle_policy")
    idle_limit_minutes = models.PositiveIntegerField()

    class Meta:
        verbose_name_plural = "idle policies"

    def __str__(self) -> str:
        return f"{self.group}: stop after {self.idle_limit_minutes} min idle"


class Leftover(models.Model):
    """A container of a cluster that could not be confirmed removed (its node did not answer
    while the cluster failed, was re-placed or destroyed), and what stays held for it: its
    address, its disks and its cluster's network segment. A container whose node's API is
    down may still run on the data network, so nobody else gets them until the reconciler
    sees it gone; then they are released, exactly once (apps.clusters.leftovers)."""

    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="leftovers")
    instance = models.ForeignKey(Instance, on_delete=models.CASCADE, related_name="+")
    node = models.ForeignKey("inventory.Node", on_delete=models.PROTECT, related_name="+")
    container = models.CharField(max_length=200, help_text="Its name on the node")
    address = models.ForeignKey(
        "inventory.Address", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    disk_ids = models.JSONField(default=list, blank=True)
    segment = models.ForeignKey(
        "inventory.Network", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created = models.DateTimeField(auto_now_add=True)
    released = models.DateTimeField(null=True, blank=True)

    class Meta:
        indexes = [
            models.Index(
                fields=["node"], name="leftover_held_by_node", condition=models.Q(released=None)
            ),
        ]

    def __str__(self) -> str:
        return f"{self.container} on node {self.node_id}"
