"""The rules of a resize: which role a cluster grows or shrinks, to what sizes, and what a
shrink must leave standing. Plain functions over the cluster's records (no node calls): the
request (services.request_resize) refuses with their words, the worker (workers/resize.py)
does the node work and the checks that need the product's own answer (HDFS used bytes, the
replication of Cassandra's keyspaces: the rule is here, the worker reads the keyspaces).

A product's size is the launch option that sets the count of one role (``size``, CESGA's
name); the bounds are that option's and that role's together."""

from dataclasses import dataclass

from apps.catalog.options import InstanceSpec, resolve
from apps.catalog.spec import definition_of

from .models import Cluster, Instance
from .quotas import Demand

S = Cluster.State

# Products whose members cannot simply be added or removed: FerretDB's members are independent
# servers (each its own data), MongoDB's replica set membership is not managed by Platter.
NOT_RESIZABLE = {
    "mongodb": "its members are independent servers, each with its own data",
}
# Products whose data lives in HDFS on the scalable role (replication checks, decommission).
HDFS_PRODUCTS = {"hadoop"}
# Cassandra's own keyspaces that Platter replicates to the ring's size (system_auth to
# min(3, nodes) by cassandra-auth): a shrink lowers them rather than being refused by them
# (Cassandra's decommission itself refuses to leave fewer nodes than any keyspace's copies).
CASSANDRA_OWN_KEYSPACES = ("system_auth", "system_distributed", "system_traces")


class ResizeRefused(ValueError):
    """A resize that cannot be done; the message says why (HTTP 400)."""


@dataclass(frozen=True)
class Scaling:
    role: str  # the role whose instances the size counts
    option: str  # the launch option that sets it
    low: int
    high: int


@dataclass(frozen=True)
class ResizePlan:
    cluster_id: int
    role: str
    current: int
    target: int
    # Instances a grow adds, as the catalog would launch them (the role's resources as the
    # cluster's existing instances of that role have them).
    added: list[InstanceSpec]

    @property
    def grows(self) -> bool:
        return self.target > self.current

    @property
    def demand(self) -> Demand:  # a Growth
        return Growth.of(self.added)


@dataclass(frozen=True)
class Growth(Demand):
    """The extra instances of a running cluster: they count against every limit but the
    number of clusters."""

    def as_limits(self, clusters: int = 0) -> dict[str, int]:
        return super().as_limits(clusters=0)


def scaling_of(cluster: Cluster) -> Scaling:
    """The role a resize changes and its bounds; ResizeRefused for a product without one."""
    product = cluster.version.product.name
    if product in NOT_RESIZABLE:
        raise ResizeRefused(
            f"{cluster.version.product.title or product} clusters cannot be resized: "
            f"{NOT_RESIZABLE[product]}"
        )
    definition = definition_of(cluster.definition)
    for name, option in definition.options.items():
        roles = definition.targeted_roles(option)
        if (
            option.sets == "count"
            and len(roles) == 1
            and definition.option_sections[name] == ("required")
        ):
            bounds = roles[0].bounds("count")
            low = max(bounds.min, option.min if option.min is not None else bounds.min)
            high = min(bounds.max, option.max if option.max is not None else bounds.max)
            return Scaling(roles[0].name, name, low, high)
    raise ResizeRefused(f"{cluster.version} has no size option: it cannot be resized")


def hdfs_replication(cluster: Cluster) -> int:
    """dfs.replication as the cluster's NameNode has it: the replication option ("auto": 3),
    never more than the workers it launched with (hadoop-start in the image does the same)."""
    options = resolve(cluster.definition, cluster.options).options
    chosen = options.get("replication", "auto")
    wanted = 3 if chosen == "auto" else int(chosen)
    return max(1, min(wanted, int(options.get("size", wanted))))


def pinned_options(cluster: Cluster) -> dict | None:
    """The cluster's options with what its size decided at launch written out, so that
    instances made later are configured as the first ones (HDFS's "auto" replication is
    min(3, launch size): new workers must not pick a higher one); None when nothing changes."""
    if cluster.version.product.name not in HDFS_PRODUCTS:
        return None
    if cluster.options.get("replication", "auto") not in ("auto", None):
        return None
    return {**cluster.options, "replication": hdfs_replication(cluster)}


def plan(cluster: Cluster, workers: object) -> ResizePlan:
    """What resizing the cluster to `workers` instances of its scalable role means, or
    ResizeRefused naming why it cannot be done."""
    if cluster.state != S.RUNNING:
        raise ResizeRefused(
            f"cluster {cluster.name} is {cluster.state}; only a running cluster can be resized"
        )
    scaling = scaling_of(cluster)
    if isinstance(workers, bool) or not isinstance(workers, int):
        raise ResizeRefused(f"workers must be a whole number; got {workers!r}")
    if not scaling.low <= workers <= scaling.high:
        raise ResizeRefused(
            f"role {scaling.role} allows {scaling.low} to {scaling.high} instances; asked {workers}"
        )
    members = list(
        Instance.objects.filter(cluster=cluster, role=scaling.role, active=True).order_by("index")
    )
    current = len(members)
    if workers == current:
        raise ResizeRefused(f"cluster {cluster.name} already has {current} {scaling.role}s")
    if workers < current and cluster.version.product.name in HDFS_PRODUCTS:
        replication = hdfs_replication(cluster)
        if workers < replication:
            raise ResizeRefused(
                f"HDFS keeps {replication} copies of each block (dfs.replication "
                f"{replication}): at least {replication} {scaling.role}s must stay; "
                f"asked {workers}"
            )
    added = []
    if workers > current:
        model = members[-1] if members else None
        if model is None:
            raise ResizeRefused(f"cluster {cluster.name} has no {scaling.role} to copy")
        next_index = 1 + max(
            Instance.objects.filter(cluster=cluster, role=scaling.role).values_list(
                "index", flat=True
            )
        )
        added = [
            InstanceSpec(
                scaling.role,
                next_index + n,
                model.cores,
                model.memory_mb,
                model.disks,
                model.disk_kind,
                model.image,
            )
            for n in range(workers - current)
        ]
    return ResizePlan(cluster.id, scaling.role, current, workers, added)


def leaving(cluster: Cluster, role: str, target: int) -> list[Instance]:
    """The instances a shrink to `target` removes: the newest of the role (highest index).
    Cassandra's seeds are a role of their own, never the scalable one: no shrink removes one."""
    members = list(
        Instance.objects.filter(cluster=cluster, role=role, active=True)
        .select_related("node")
        .order_by("index")
    )
    return members[target:]


def replication_factor(replication: dict[str, str]) -> int:
    """The copies a keyspace keeps, from its replication map in system_schema.keyspaces:
    SimpleStrategy's replication_factor, NetworkTopologyStrategy's largest per-datacenter
    count (a Platter ring is one datacenter); 0 for LocalStrategy (each node's own)."""
    strategy = str(replication.get("class", "")).rsplit(".", 1)[-1]
    if strategy == "SimpleStrategy":
        return _copies(replication.get("replication_factor", "1"))
    if strategy == "NetworkTopologyStrategy":
        return max((_copies(v) for k, v in replication.items() if k != "class"), default=0)
    return 0


def _copies(value: object) -> int:
    # "3", or "3/1" with transient replicas: every replica needs a node.
    return int(str(value).split("/", 1)[0])


def ring_shrink_refusal(factors: dict[str, int], staying: int) -> str | None:
    """Why a Cassandra ring cannot shrink to `staying` nodes (seeds included), or None: a
    keyspace keeping more copies than nodes would stay (the one keeping the most is named).
    Cassandra's own keyspaces do not count: the worker lowers them to the nodes that stay."""
    over = {
        name: copies
        for name, copies in factors.items()
        if copies > staying and name not in CASSANDRA_OWN_KEYSPACES
    }
    if not over:
        return None
    name = min(over, key=lambda k: (-over[k], k))
    copies = over[name]
    return (
        f"keyspace {name} has replication factor {copies}: at least {copies} Cassandra nodes "
        f"(seeds included) must stay, and this shrink would leave {staying}; lower its "
        "replication (ALTER KEYSPACE) or keep more nodes"
    )
