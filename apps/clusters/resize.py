"""The rules of a resize: which role a cluster grows or shrinks, to what sizes, and what a
shrink must leave standing. Plain functions over the cluster's records (no node calls): the
request (services.request_resize) refuses with their words and the version's plugin's
(apps/products: HDFS's replication, FerretDB's independent members, the generic plugin's
refusal of roles that keep state); the worker (workers/resize.py) does the node work and the
plugin the checks that need the product's own answer (HDFS used bytes, Cassandra's keyspaces).

A product's size is the launch option that sets the count of one role (``size``, CESGA's
name); the bounds are that option's and that role's together."""

from dataclasses import dataclass

from apps.catalog.options import InstanceSpec, OptionsError, resolve
from apps.catalog.spec import ProductDefinition, definition_of
from apps.products.base import ResizeAsk
from apps.products.registry import plugin_for

from .models import Cluster, Instance
from .quotas import Demand

S = Cluster.State


class ResizeRefused(ValueError):
    """A resize that cannot be done; the message says why (HTTP 400), `field` the request's
    field it is about (None: the request as a whole, such as a node without room)."""

    def __init__(self, message: str, field: str | None = "workers") -> None:
        super().__init__(message)
        self.field = field


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


def stateful_roles(definition: ProductDefinition) -> dict[str, bool]:
    """Each role of the definition, and whether its instances keep data on their disks."""
    return {r.name: r.bounds("disks").max > 0 for r in definition.roles}


def resizable_roles(version: object) -> list[str]:
    """The roles of a version (a ProductVersion, or a cluster's frozen definition) that its
    plugin resizes: of the generic plugin, only roles that keep no state."""
    return plugin_for(version).resizable_roles(stateful_roles(definition_of(version)))


@dataclass(frozen=True)
class Draining:
    """A shrink under way: `role` from `current` members to `target`."""

    role: str
    current: int
    target: int
    words: str  # what happens to the leaving members meanwhile, in the plugin's words


def drain_words(cluster: Cluster, role: str) -> str:
    """What a user reads about the members a shrink removes: the version's plugin's words
    (HDFS decommission, executors ending, nodetool decommission), or, for a plugin without a
    drain, that they are stopped and removed."""
    words = plugin_for(cluster.definition).drain_words
    return words or f"the leaving {role}s are stopped and removed"


def draining(cluster: Cluster) -> Draining | None:
    """The shrink the cluster is going through, None for anything else (a grow, a notebook
    being added, a cluster not resizing)."""
    if cluster.state != S.RESIZING or cluster.resize_to is None:
        return None
    try:
        role = scaling_of(cluster).role
    except ResizeRefused:
        return None
    current = Instance.objects.filter(cluster=cluster, role=role, active=True).count()
    if cluster.resize_to >= current:
        return None
    return Draining(role, current, cluster.resize_to, drain_words(cluster, role))


def refusal(cluster: Cluster, role: str, current: int, target: int) -> str | None:
    """The version's plugin's words against resizing `role` from `current` to `target`."""
    definition = definition_of(cluster.definition)
    options = resolve(cluster.definition, cluster.options).options
    stateful = stateful_roles(definition).get(role, True)
    ask = ResizeAsk(role, current, target, stateful, options)
    return plugin_for(cluster.definition).resize_refusal(ask)


def pinned_options(cluster: Cluster) -> dict | None:
    """The cluster's options with what its size decided at launch written out, so that
    instances made later are configured as the first ones (the plugin's: HDFS's "auto"
    replication); None when nothing changes."""
    resolved = resolve(cluster.definition, cluster.options).options
    return plugin_for(cluster.definition).pinned_options(cluster.options, resolved)


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
    members = list(
        Instance.objects.filter(cluster=cluster, role=scaling.role, active=True).order_by("index")
    )
    current = len(members)
    if workers != current and (words := refusal(cluster, scaling.role, current, workers)):
        raise ResizeRefused(words)
    if not scaling.low <= workers <= scaling.high:
        raise ResizeRefused(
            f"role {scaling.role} allows {scaling.low} to {scaling.high} instances; asked {workers}"
        )
    if workers == current:
        raise ResizeRefused(f"cluster {cluster.name} already has {current} {scaling.role}s")
    added = []
    if workers > current:
        model = members[-1] if members else as_launched(cluster, scaling, workers)
        next_index = 1 + max(
            Instance.objects.filter(cluster=cluster, role=scaling.role).values_list(
                "index", flat=True
            ),
            default=-1,
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


def as_launched(cluster: Cluster, scaling: Scaling, workers: int) -> InstanceSpec:
    """The scalable role's instance as a launch of the cluster's version and options with
    that size would make it: what a grow adds to a cluster holding none of the role yet
    (Kafka launched with no broker-only nodes), there being no member to copy."""
    try:
        spec = resolve(cluster.definition, {**cluster.options, scaling.option: workers})
    except OptionsError as error:
        raise ResizeRefused(
            f"cluster {cluster.name} cannot have {workers} {scaling.role}s: {error}"
        ) from None
    made = [instance for instance in spec.instances if instance.role == scaling.role]
    if not made:
        raise ResizeRefused(f"cluster {cluster.name} has no {scaling.role} to copy")
    return made[0]


def leaving(cluster: Cluster, role: str, target: int) -> list[Instance]:
    """The instances a shrink to `target` removes: the newest of the role (highest index).
    Cassandra's seeds are a role of their own, never the scalable one: no shrink removes one."""
    members = list(
        Instance.objects.filter(cluster=cluster, role=role, active=True)
        .select_related("node")
        .order_by("index")
    )
    return members[target:]
