"""The rules of a vertical resize: new cores and memory for every instance of one role.

Instances never move away from their disks, so a grow must fit where each instance already
is: the request checks every node the role's instances are on (under their row locks, after
the owner's quota) and refuses naming the node that lacks room. The new figures are written to
the instances in the same transaction, so the node capacity and the quota are held from the
request on, as a launch's reservation holds them; what they were is kept on the cluster
(``Cluster.reshape``) for the worker to put back if the change cannot be carried out.

How it is carried out (workers/resize.py): cores always change live (the containers' CPU
limit, no restart); memory changes live only where the version's plugin says its product can
use it (``memory_live``), otherwise by a rolling restart, one instance at a time, each back
and healthy before the next goes."""

from dataclasses import dataclass

from django.db import connection
from django.utils import timezone

from apps.catalog.spec import definition_of
from apps.products.registry import plugin_for

from .models import Cluster, Instance, ResourceChange
from .placement import free_on
from .reservation import LOCK_NODES_SQL
from .resize import Growth, ResizeRefused

S = Cluster.State

LIVE_CORES = (
    "cores change live: the containers' CPU limit is set now, without a restart (what the "
    "product derived from its core count at start, such as worker slots, keeps its value "
    "until its next restart)"
)


@dataclass(frozen=True)
class Change:
    """One instance's move from its figures to the asked ones."""

    instance_id: int
    hostname: str
    node_id: int
    node: str
    cores: tuple[int, int]  # (now, asked)
    memory_mb: tuple[int, int]


@dataclass(frozen=True)
class VerticalPlan:
    cluster_id: int
    role: str
    cores: int
    memory_mb: int
    changes: list[Change]
    memory_live: bool  # the plugin's: the product uses more memory without a restart

    @property
    def memory_changes(self) -> bool:
        return any(before != after for before, after in (c.memory_mb for c in self.changes))

    @property
    def rolling(self) -> bool:
        """Whether the instances restart one at a time (memory their product fixes at start)."""
        return self.memory_changes and not self.memory_live

    @property
    def demand(self) -> Growth:
        """What the change adds to the owner's usage (nothing for what it gives back)."""
        return Growth(
            instances=0,
            cores=max(0, sum(after - before for before, after in (c.cores for c in self.changes))),
            memory_mb=max(
                0, sum(after - before for before, after in (c.memory_mb for c in self.changes))
            ),
            disks_by_kind={},
        )

    @property
    def grows(self) -> bool:
        return self.demand.cores > 0 or self.demand.memory_mb > 0

    def how(self) -> list[str]:
        """What happens to the instances, in a user's words (the preview and the events)."""
        said = []
        if any(before != after for before, after in (c.cores for c in self.changes)):
            said.append(LIVE_CORES)
        if self.memory_changes:
            if self.memory_live:
                said.append("memory changes live: the containers' limit is set now")
            else:
                count = len(self.changes)
                said.append(
                    f"memory is fixed when this product starts: the {self.role}s restart one "
                    f"at a time ({count} restart{'' if count == 1 else 's'}), each back and "
                    "healthy before the next, keeping their disks"
                )
        return said

    def as_record(self) -> dict:
        """What Cluster.reshape keeps while the change runs: the role, the asked figures, and
        each instance's figures before, to put back."""
        return {
            "role": self.role,
            "cores": self.cores,
            "memory_mb": self.memory_mb,
            "rolling": self.rolling,
            "before": {str(c.instance_id): [c.cores[0], c.memory_mb[0]] for c in self.changes},
        }


def bounds_of(cluster: Cluster, role: str, resource: str) -> tuple[int, int]:
    """The per-instance range of `resource` for `role`: the role's in the version, narrowed by
    a launch option that sets it."""
    definition = definition_of(cluster.definition)
    found = definition.role(role)
    if found is None:
        raise ResizeRefused(f"{cluster.version} has no role {role}", "role")
    bounds = found.bounds(resource)
    low, high = bounds.min, bounds.max
    for option in definition.options.values():
        if option.sets == resource and role in [r.name for r in definition.targeted_roles(option)]:
            low = max(low, option.min if option.min is not None else low)
            high = min(high, option.max if option.max is not None else high)
    return low, high


def _whole(value: object, name: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise ResizeRefused(f"{name} must be a whole number; got {value!r}", name)
    return value


def plan(
    cluster: Cluster, role: object, cores: object = None, memory_mb: object = None
) -> VerticalPlan:
    """New cores and/or memory (None: unchanged) for every instance of `role`, or
    ResizeRefused naming why not. Capacity on the nodes is checked by `shortage`."""
    if cluster.state != S.RUNNING:
        raise ResizeRefused(
            f"cluster {cluster.name} is {cluster.state}; only a running cluster can be resized",
            None,
        )
    if not isinstance(role, str) or not role:
        raise ResizeRefused("name the role whose instances change (role)", "role")
    asked_cores, asked_memory = _whole(cores, "cores"), _whole(memory_mb, "memory_mb")
    if asked_cores is None and asked_memory is None:
        raise ResizeRefused("give new cores, new memory_mb, or both", None)
    members = list(
        Instance.objects.filter(cluster=cluster, role=role, active=True)
        .select_related("node")
        .order_by("index")
    )
    if not members:
        active = Instance.objects.filter(cluster=cluster, active=True)
        roles = sorted(set(active.values_list("role", flat=True)))
        raise ResizeRefused(
            f"cluster {cluster.name} has no running {role}; its roles are {', '.join(roles)}",
            "role",
        )
    now_cores, now_memory = members[-1].cores, members[-1].memory_mb
    new_cores = now_cores if asked_cores is None else asked_cores
    new_memory = now_memory if asked_memory is None else asked_memory
    for resource, value in (("cores", new_cores), ("memory_mb", new_memory)):
        low, high = bounds_of(cluster, role, resource)
        if not low <= value <= high:
            unit = "cores" if resource == "cores" else "MB of memory"
            raise ResizeRefused(
                f"a {role} of {cluster.version} may have {low} to {high} {unit}; asked {value}",
                resource,
            )
    changes = [
        Change(
            m.id,
            m.hostname,
            m.node_id or 0,
            m.node.name if m.node else "no node",
            (m.cores, new_cores),
            (m.memory_mb, new_memory),
        )
        for m in members
    ]
    if all(c.cores[0] == new_cores and c.memory_mb[0] == new_memory for c in changes):
        raise ResizeRefused(
            f"the {role}s of {cluster.name} already have {new_cores} cores and {new_memory} MB",
            None,
        )
    live = bool(getattr(plugin_for(cluster.definition), "memory_live", False))
    return VerticalPlan(cluster.id, role, new_cores, new_memory, changes, live)


def shortage(vertical: VerticalPlan, lock: bool = False) -> str | None:
    """Why the instances cannot grow where they are (the first node without room for what its
    instances of the role add), None when every node has room. With `lock`, the nodes' rows
    are locked first (in id order, as the reservation locks them), so the answer holds until
    the transaction ends."""
    added: dict[int, list[Change]] = {}
    for change in vertical.changes:
        added.setdefault(change.node_id, []).append(change)
    node_ids = sorted(added)
    if lock:
        with connection.cursor() as cursor:
            cursor.execute(LOCK_NODES_SQL, [node_ids])  # the reservation's lock, its order
    free = free_on(node_ids)
    for node_id in node_ids:
        here = added[node_id]
        cores = sum(c.cores[1] - c.cores[0] for c in here)
        memory = sum(c.memory_mb[1] - c.memory_mb[0] for c in here)
        room = free.get(node_id)
        has_cores = room.cores if room else 0
        has_memory = room.memory_mb if room else 0
        if cores > has_cores or memory > has_memory:
            names = ", ".join(c.hostname for c in here)
            return (
                f"node {here[0].node} has {has_cores} free cores and {has_memory} MB; "
                f"{names} there would need {max(cores, 0)} more cores and {max(memory, 0)} MB "
                "more (instances stay with their disks, so they cannot move to another node)"
            )
    return None


def set_figures(figures: dict[int, tuple[int, int]]) -> None:
    """Give instances new (cores, memory_mb), each change recorded for usage from now on.
    Call in the transaction that holds the cluster's lock."""
    now = timezone.now()
    instances = Instance.objects.filter(id__in=figures)
    changes = []
    for instance in instances:
        cores, memory_mb = figures[instance.id]
        if (cores, memory_mb) == (instance.cores, instance.memory_mb):
            continue
        changes.append(
            ResourceChange(
                instance=instance,
                at=now,
                cores_before=instance.cores,
                memory_mb_before=instance.memory_mb,
                cores=cores,
                memory_mb=memory_mb,
            )
        )
        Instance.objects.filter(id=instance.id).update(cores=cores, memory_mb=memory_mb)
    ResourceChange.objects.bulk_create(changes)


def asked_figures(record: dict) -> dict[int, tuple[int, int]]:
    """The figures a running change (Cluster.reshape) gives each of its instances."""
    return {int(i): (record["cores"], record["memory_mb"]) for i in record["before"]}


def figures_before(record: dict) -> dict[int, tuple[int, int]]:
    """Each instance's figures before the change, to put back."""
    return {int(i): (cores, memory) for i, (cores, memory) in record["before"].items()}
