"""Choosing nodes for a cluster's instances from per-node free counts.

One SQL statement returns candidate nodes with their free cores, memory and disks per kind;
the concrete disks are only picked later, on the chosen (locked) nodes. Scanning starts at a
random node id and stops after SCHEDULER_CANDIDATE_WINDOW fitting nodes, so the cost stays flat
on large inventories and concurrent reservations mostly look at different nodes.
"""

import functools
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings
from django.db import connection

from apps.inventory.models import Disk, Node

from .models import Cluster, Instance
from .node_usage import column, literal, table, usage_joins
from .quotas import DISK_KINDS


@dataclass
class NodeFree:
    node_id: int
    cores: int
    memory_mb: int
    disks: dict[str, int]
    total_cores: int
    total_memory_mb: int
    total_disks: int = 0

    def fits(self, want) -> bool:
        return (
            self.cores >= want.cores
            and self.memory_mb >= want.memory_mb
            and self.disks.get(want.disk_kind, 0) >= want.disks
        )

    def take(self, want) -> None:
        self.cores -= want.cores
        self.memory_mb -= want.memory_mb
        self.disks[want.disk_kind] = self.disks.get(want.disk_kind, 0) - want.disks

    def waste(self, want) -> tuple:
        """Lower is better: first disks stranded (left without cores or memory to use them),
        then how much is left over (best fit keeps big holes for big instances)."""
        cores = self.cores - want.cores
        memory = self.memory_mb - want.memory_mb
        disks = sum(self.disks.values()) - want.disks
        stranded = disks if (cores == 0 or memory == 0) else 0
        left = cores / max(self.total_cores, 1) + memory / max(self.total_memory_mb, 1)
        return (stranded, round(left + disks / max(self.total_disks, 1), 6))


@functools.cache
def _names() -> dict[str, str]:
    """The tables, columns and states placement's SQL names, read from the models."""
    return {
        "node": table(Node),
        "n_id": column(Node, "pk"),
        "n_cores": column(Node, "cores"),
        "n_memory": column(Node, "memory_mb"),
        "n_state": column(Node, "state"),
        "active_node": literal(Node.State.ACTIVE),
        "cluster": table(Cluster),
        "c_id": column(Cluster, "pk"),
        "c_avoid": column(Cluster, "avoid_nodes"),
        "c_reuse": column(Cluster, "reuse_data_of"),
        "instance": table(Instance),
        "i_cluster": column(Instance, "cluster"),
        "i_cores": column(Instance, "cores"),
        "i_memory": column(Instance, "memory_mb"),
        "i_disks": column(Instance, "disks"),
        "i_kind": column(Instance, "disk_kind"),
    }


# Free cores, memory and disks (of the asked kinds) of the nodes matching {where}, which may
# use n (the node), u (what active instances use) and k (free disks per kind): the node usage
# of node_usage.usage_joins. Rows are read by these column names (parse).
FREE_SQL = """
SELECT n.{n_id} AS node_id, n.{n_cores} - COALESCE(u.cores, 0) AS cores,
       n.{n_memory} - COALESCE(u.memory_mb, 0) AS memory_mb, {kinds},
       n.{n_cores} AS total_cores, n.{n_memory} AS total_memory_mb
FROM {node} n{usage}
WHERE {where}
"""


def _sql(where: str, kinds: tuple[str, ...], suffix: str = "") -> str:
    """FREE_SQL counting `kinds`, which must come from DISK_KINDS (they become SQL text)."""
    kind_columns = ", ".join(f"k.{kind} AS {kind}" for kind in kinds)
    usage = usage_joins(kinds)
    return FREE_SQL.format(kinds=kind_columns, usage=usage, where=where, **_names()) + suffix


def named_rows(cursor) -> list[dict[str, Any]]:
    """The fetched rows of a DB-API cursor as {column name: value}."""
    names = [col.name for col in cursor.description]
    return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]


def parse(rows: Iterable[Mapping[str, Any]], kinds: Iterable[str]) -> list[NodeFree]:
    """Rows of FREE_SQL (as built by the statements below, read as {column: value}, e.g. by
    psycopg's dict_row or named_rows) as NodeFree."""
    result = []
    for row in rows:
        disks = {kind: row[kind] for kind in kinds}
        free = NodeFree(
            node_id=row["node_id"],
            cores=row["cores"],
            memory_mb=row["memory_mb"],
            disks=disks,
            total_cores=row["total_cores"],
            total_memory_mb=row["total_memory_mb"],
            total_disks=sum(disks.values()),
        )
        result.append(free)
    return result


def _fetch(statement: tuple[str, list | dict], kinds) -> list[NodeFree]:
    with connection.cursor() as cursor:
        cursor.execute(*statement)
        return parse(named_rows(cursor), kinds)


def free_statement(node_ids: list[int], kinds=DISK_KINDS) -> tuple[str, list, tuple[str, ...]]:
    """SQL, parameters and counted kinds of free_on(): only the asked kinds that exist are
    counted. Run it after locking the nodes for numbers that stay true."""
    known = tuple(k for k in DISK_KINDS if k in kinds) or DISK_KINDS
    return _free_sql(known), [list(node_ids)], known


@functools.cache
def _free_sql(kinds: tuple[str, ...]) -> str:
    return _sql("n.{n_id} = ANY(%s::bigint[])".format(**_names()), kinds)


def free_on(node_ids: list[int], kinds=DISK_KINDS) -> dict[int, NodeFree]:
    """Free counts of given nodes (call after locking them for numbers that stay true)."""
    if not node_ids:
        return {}
    sql, params, known = free_statement(node_ids, kinds)
    return {f.node_id: f for f in _fetch((sql, params), known)}


# What every candidate must offer at least (the smallest of the instances to place), which
# nodes to leave out and how many candidates to return: given as values, or read from a
# queued cluster's instances inside the statement (the reservation sends it in the same
# round trip as the cluster lock). A cluster reusing data has no candidates: its instances go
# back to the nodes holding their data. kind is NULL when the instances ask for several kinds.
GIVEN_WANT = """SELECT %(cores)s::int AS cores, %(memory)s::int AS memory, %(disks)s::int AS disks,
    %(kind)s::text AS kind, %(avoid)s::bigint[] AS avoid, %(window)s::int AS size"""
CLUSTER_WANT = """SELECT MIN(i.{i_cores}) AS cores, MIN(i.{i_memory}) AS memory,
    MIN(i.{i_disks}) AS disks,
    CASE WHEN COUNT(DISTINCT i.{i_kind}) = 1 THEN MIN(i.{i_kind}) END AS kind,
    ARRAY(SELECT jsonb_array_elements_text(c.{c_avoid})::bigint) AS avoid,
    GREATEST(%(window)s::int, 2 * COUNT(*))::int AS size
    FROM {cluster} c JOIN {instance} i ON i.{i_cluster} = c.{c_id}
    WHERE c.{c_id} = %(cluster)s AND c.{c_reuse} IS NULL GROUP BY c.{c_id}"""


def candidates_statement(
    wants: list, window: int | None = None, avoid: list[int] | None = None
) -> tuple[str, dict, tuple[str, ...]] | None:
    """SQL, parameters and counted disk kinds of candidates(), or None when no node can have
    what is asked (a disk kind no node has)."""
    kinds = {w.disk_kind for w in wants}
    if not kinds <= set(DISK_KINDS):
        return None  # no node has disks of an unknown kind
    params = {
        "cores": min(w.cores for w in wants),
        "memory": min(w.memory_mb for w in wants),
        "disks": min(w.disks for w in wants),
        "kind": next(iter(kinds)) if len(kinds) == 1 else None,
        "avoid": list(avoid or []),
        "window": max(window or settings.SCHEDULER_CANDIDATE_WINDOW, 2 * len(wants)),
    }
    return _candidates_sql(GIVEN_WANT), params, DISK_KINDS


def cluster_candidates_statement(cluster_id: int) -> tuple[str, dict, tuple[str, ...]]:
    """candidates_statement() for the instances of a queued cluster, read by the statement
    itself, avoiding the nodes its earlier placements failed on."""
    params = {"cluster": cluster_id, "window": settings.SCHEDULER_CANDIDATE_WINDOW}
    return _candidates_sql(CLUSTER_WANT), params, DISK_KINDS


# Nodes that fit the smallest instance, in id order from a random pivot, wrapping around. The
# scalar subqueries on `want` are computed once, before the scan: the plan stays a walk along
# the node id index that stops at the window. The pivot is drawn once (a CTE used twice is
# materialised), and the LIMIT over UNION ALL stops before the wrap-around part when the first
# part fills it.
CANDIDATES_SQL = """
WITH want AS ({want}),
pivot AS (SELECT MIN({n_id}) + floor(random() * (MAX({n_id}) - MIN({n_id}) + 1))::bigint AS id
          FROM {node})
SELECT * FROM (({after}) UNION ALL ({before})) found LIMIT (SELECT size FROM want)
"""
CANDIDATE_FIT = """n.{n_state} = {active_node}
    AND n.{n_cores} - COALESCE(u.cores, 0) >= (SELECT cores FROM want)
    AND n.{n_memory} - COALESCE(u.memory_mb, 0) >= (SELECT memory FROM want)
    AND NOT n.{n_id} = ANY((SELECT avoid FROM want)::bigint[])
    AND ((SELECT kind FROM want) IS NULL
         OR CASE (SELECT kind FROM want) {disks} ELSE -1 END >= (SELECT disks FROM want))
    AND n.{n_id} {side} (SELECT id FROM pivot)"""


@functools.cache
def _candidates_sql(want: str) -> str:
    names = _names()
    disks = " ".join(f"WHEN {literal(kind)} THEN k.{kind}" for kind in DISK_KINDS)
    order = f" ORDER BY n.{names['n_id']} LIMIT (SELECT size FROM want)"  # noqa: S608  (model names)
    after = _sql(CANDIDATE_FIT.format(disks=disks, side=">=", **names), DISK_KINDS, order)
    before = _sql(CANDIDATE_FIT.format(disks=disks, side="<", **names), DISK_KINDS, order)
    return CANDIDATES_SQL.format(want=want.format(**names), after=after, before=before, **names)


def candidates(
    wants: list, window: int | None = None, avoid: list[int] | None = None
) -> list[NodeFree]:
    """Up to `window` active nodes that can take at least the smallest of `wants`, leaving
    out the `avoid` node ids (nodes that failed this cluster's earlier placement)."""
    statement = candidates_statement(wants, window, avoid)
    if statement is None:
        return []
    sql, params, kinds = statement
    return _fetch((sql, params), kinds)


def assign(wants: list, nodes: list[NodeFree], spread: bool | None = None) -> dict | None:
    """Map each want (an Instance) to a node id, or None when they do not all fit.
    Biggest instances first; each goes to the fitting node holding the fewest instances of
    this cluster so far (distinct nodes when possible), then the one wasting least."""
    spread = settings.SCHEDULER_SPREAD if spread is None else spread
    remaining = {n.node_id: NodeFree(**{**n.__dict__, "disks": dict(n.disks)}) for n in nodes}
    placed_on: dict[int, int] = defaultdict(int)
    plan = {}
    order = sorted(wants, key=lambda w: (w.disks, w.cores, w.memory_mb), reverse=True)
    for want in order:
        fitting = [n for n in remaining.values() if n.fits(want)]
        if not fitting:
            return None
        if spread:
            best = min(fitting, key=lambda n: (placed_on[n.node_id], n.waste(want), n.node_id))
        else:
            best = min(fitting, key=lambda n: (n.waste(want), n.node_id))
        best.take(want)
        placed_on[best.node_id] += 1
        plan[want.id] = best.node_id
    return plan


@dataclass
class Shortage:
    """The best any single node can offer, for rejection messages."""

    disks: dict[str, int] = field(default_factory=dict)
    cores: int = 0
    memory_mb: int = 0


def best_offer() -> Shortage:
    maxima = ", ".join(f"MAX({kind}) AS {kind}" for kind in DISK_KINDS)
    free = _sql("n.{n_state} = {active_node}".format(**_names()), DISK_KINDS)
    sql = f"SELECT {maxima}, MAX(cores) AS cores, MAX(memory_mb) AS memory_mb FROM ({free}) f"  # noqa: S608  (our constants)
    with connection.cursor() as cursor:
        cursor.execute(sql)
        (row,) = named_rows(cursor)
    disks = {kind: row[kind] or 0 for kind in DISK_KINDS}
    return Shortage(disks=disks, cores=row["cores"] or 0, memory_mb=row["memory_mb"] or 0)


def pool_as_built() -> list[NodeFree]:
    """Every node of the pool as if nothing ran on it: all its cores, memory and usable disks
    (not failed or retired). Nodes that are down or in maintenance count (they come back);
    draining ones do not (they are leaving)."""
    staying = [Node.State.ACTIVE, Node.State.DOWN, Node.State.MAINTENANCE]
    nodes = {
        n.id: NodeFree(n.id, n.cores, n.memory_mb, {}, n.cores, n.memory_mb)
        for n in Node.objects.filter(state__in=staying)
    }
    usable = Disk.objects.filter(
        node_id__in=nodes,
        state__in=[Disk.State.AVAILABLE, Disk.State.ALLOCATED, Disk.State.BENCHMARKING],
    )
    for node_id, kind in usable.values_list("node_id", "kind"):
        free = nodes[node_id]
        free.disks[kind] = free.disks.get(kind, 0) + 1
        free.total_disks += 1
    return list(nodes.values())


@dataclass(frozen=True)
class _Sized:
    id: int
    cores: int
    memory_mb: int
    disks: int
    disk_kind: str


def never_fits(instances: list) -> str | None:
    """Why these instances could not run on the pool as it is, even if every other cluster
    ended now; None when they could. instances: anything with cores, memory_mb, disks and
    disk_kind (e.g. InstanceWant)."""
    wants = [_Sized(n, i.cores, i.memory_mb, i.disks, i.disk_kind) for n, i in enumerate(instances)]
    pool = pool_as_built()
    if not pool:
        return "the pool has no node"
    if assign(wants, pool) is not None:
        return None
    for want in sorted(wants, key=lambda w: (w.disks, w.cores, w.memory_mb), reverse=True):
        if any(node.fits(want) for node in pool):
            continue
        kind = want.disk_kind.upper()
        most_disks = max(node.disks.get(want.disk_kind, 0) for node in pool)
        if want.disks and most_disks == 0:
            return f"no node has {kind} disks"
        if want.disks > most_disks:
            return (
                f"an instance asks for {want.disks} {kind} disks; "
                f"no node has more than {most_disks}"
            )
        if want.cores > max(node.cores for node in pool):
            biggest = max(node.cores for node in pool)
            return f"an instance asks for {want.cores} cores; the biggest node has {biggest}"
        if want.memory_mb > max(node.memory_mb for node in pool):
            biggest = max(node.memory_mb for node in pool)
            return (
                f"an instance asks for {want.memory_mb} MB of memory; "
                f"the biggest node has {biggest} MB"
            )
        return (
            f"no single node has {want.cores} cores, {want.memory_mb} MB and {want.disks} "
            f"{kind} disks together"
        )
    return f"its {len(wants)} instances together need more than the whole pool has"
