"""A node's usage, defined once: what its active instances hold and which of its disks are free.

Used: the cores and memory of the node's active instances. Free: the rest of its cores and
memory, and per kind its disks in state available (free ones and those keeping a destroyed
cluster's data: a reuse takes them back, any placement may take them). Placement reads it in
SQL (USAGE_JOINS, inside its one statement under the node locks); querysets read it as
annotations (active_sum, free_disks: metrics, API, admin). Table and column names come from
the models, states from their choices.
"""

import functools
import re

from django.db.models import Count, IntegerField, OuterRef, Q, Subquery, Sum
from django.db.models.functions import Coalesce

from apps.inventory.models import Disk, Node

from .models import Instance

# The rule, in ORM terms: instances count while active, disks are free while available.
HOLDING = Q(active=True)
FREE_DISK_STATE = Disk.State.AVAILABLE


def column(model, field: str) -> str:
    """The database column of a model's field (the primary key for "pk")."""
    meta = model._meta
    return meta.pk.column if field == "pk" else meta.get_field(field).column


def table(model) -> str:
    return model._meta.db_table


def literal(choice: str) -> str:
    """A state from the model choices as SQL text. Not a parameter on purpose: under the
    generic plans the reservation forces, a parameter hides the value from the planner and
    the partial indexes on it (disk_available_by_node_kind) could no longer serve."""
    if not re.fullmatch(r"[a-z_]+", choice):
        raise ValueError(f"not a plain state name: {choice!r}")
    return f"'{choice}'"


# For a statement over nodes `n`: u.cores and u.memory_mb (what active instances hold, NULL
# when none) and k.<kind> (free disks per kind; only {names} are read, through the partial
# index of available disks).
USAGE_JOINS = """
LEFT JOIN LATERAL (
    SELECT SUM(i.{i_cores}) AS cores, SUM(i.{i_memory}) AS memory_mb
    FROM {instance} i WHERE i.{i_node} = n.{n_id} AND i.{i_active}
) u ON TRUE
CROSS JOIN LATERAL (
    SELECT {counts} FROM {disk} d
    WHERE d.{d_node} = n.{n_id} AND d.{d_state} = {available} AND d.{d_kind} IN ({names})
) k"""


@functools.cache
def usage_joins(kinds: tuple[str, ...]) -> str:
    """USAGE_JOINS counting `kinds`, which must come from DISK_KINDS (they become SQL text)."""
    d_kind = column(Disk, "kind")
    counts = (f"COUNT(*) FILTER (WHERE d.{d_kind} = {literal(k)}) AS {k}" for k in kinds)
    return USAGE_JOINS.format(
        instance=table(Instance),
        i_cores=column(Instance, "cores"),
        i_memory=column(Instance, "memory_mb"),
        i_node=column(Instance, "node"),
        i_active=column(Instance, "active"),
        n_id=column(Node, "pk"),
        disk=table(Disk),
        d_node=column(Disk, "node"),
        d_state=column(Disk, "state"),
        d_kind=d_kind,
        available=literal(FREE_DISK_STATE),
        counts=", ".join(counts),
        names=", ".join(literal(kind) for kind in kinds),
    )


def active_sum(field: str) -> Coalesce:
    """An annotation for a Node queryset: the sum of `field` (cores, memory_mb) over the
    node's active instances, 0 when none."""
    used = (
        Instance.objects.filter(HOLDING, node=OuterRef("pk"))
        .values("node")
        .annotate(total=Sum(field))
        .values("total")
    )
    return Coalesce(Subquery(used, output_field=IntegerField()), 0)


def free_disks(kind: str | None = None) -> Count:
    """An annotation for a Node queryset: how many of the node's disks (of `kind`, or of any
    kind) are free to reserve."""
    free = Q(disks__state=FREE_DISK_STATE)
    return Count("disks", filter=free & Q(disks__kind=kind) if kind else free)
