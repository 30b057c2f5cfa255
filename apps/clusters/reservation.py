"""All-or-nothing reservation of a cluster's cores, memory, disks and addresses, and release.

Lock order, the same everywhere so concurrent reservations never deadlock: the cluster row,
the owner's user row and quotas (by id), then the chosen nodes (by id). Addresses and disks
are taken with SKIP LOCKED, which never waits. The node locks make "free cores/memory/disks on
this node" true until commit; the partial unique constraints on allocations and addresses are
the backstop.

A reservation is nine statements in two round trips, then the commit (bench/reservation
measures it):

1. plan choice for this transaction (GENERIC_PLANS_SQL); lock the cluster row and read its
   instances; lock the owner and their quotas; read their usage; take addresses; read
   candidate nodes. The statements after the cluster lock read what they need of the cluster
   (owner, instances, nodes to avoid) themselves, so they need not wait for its answer;
2. lock the chosen nodes; read what they have free; pick the disks and write everything
   (disks, instances, allocations, the transition and its event: WRITE_SQL).

The rules run in Python between the round trips: quota limits (quotas.exceeded), which node each
instance goes on (placement.assign), and whether the locked nodes still have room (else the
transaction rolls back and plans again). The statements of one round trip go out together in
psycopg's pipeline mode, yet each still starts after the one before it finished, with a
snapshot of its own (READ COMMITTED): whatever is read after a lock sees what the previous
holder committed. That is why a lock and the reads it protects stay separate statements.
Statements use server-side binding, so Postgres keeps their plans once psycopg prepares them.
"""

import functools
import json
import logging
import sys
from collections.abc import Collection
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import psycopg
from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone
from psycopg.rows import RowFactory, dict_row, tuple_row

from apps.inventory.models import Address, Disk, Network, Node
from apps.inventory.services import cluster_network
from apps.metrics.recorded import RESERVATION_SECONDS
from apps.metrics.store import timed

from . import leftovers, placement, quotas, wakeup
from .models import Cluster, DiskAllocation, Instance
from .quotas import Demand, QuotaExceeded
from .transitions import record_event, transition, transition_ctes

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Placement:
    instance_id: int
    node_id: int
    disk_ids: tuple[int, ...]
    address_id: int


@dataclass(frozen=True)
class Reservation:
    cluster_id: int
    placements: list[Placement]


@dataclass(frozen=True)
class Rejection:
    """Why nothing was taken. cause: quota, capacity, reuse, network, state or contention."""

    cluster_id: int
    cause: str
    message: str
    quota: QuotaExceeded | None = field(default=None, compare=False)

    def __str__(self) -> str:
        return f"{self.cause}: {self.message}"


class Want(NamedTuple):
    """An instance to place, as placement and quotas read it (no model instance needed)."""

    id: int
    role: str
    index: int  # type: ignore[assignment]  # shadows tuple.index, never called on a Want
    hostname: str
    cores: int
    memory_mb: int
    disks: int
    disk_kind: str


class _Raced(Exception):
    """A concurrent reservation took what the plan counted on; plan again."""


class _Rejected(Exception):
    """Nothing can be reserved; raised to roll back what was already taken."""

    def __init__(self, cause: str, message: str, quota: QuotaExceeded | None = None) -> None:
        super().__init__(message)
        self.cause, self.message, self.quota = cause, message, quota


@timed(RESERVATION_SECONDS, outcome=lambda result: getattr(result, "cause", "reserved"))
def reserve(cluster_id: int) -> Reservation | Rejection:
    """Reserve everything a queued cluster needs in one transaction, or nothing.

    On success the cluster moves to `placing`. A quota rejection fails the cluster; a capacity
    rejection leaves it `queued` (the admission queue retries it) with the reason recorded.
    """
    for _attempt in range(settings.SCHEDULER_RESERVE_ATTEMPTS):
        try:
            with transaction.atomic():
                return _reserve_once(cluster_id)
        except _Raced:
            continue
        except _Rejected as rejected:  # rolled back: whatever was taken is given back
            return _reject(cluster_id, rejected)
    message = "concurrent reservations kept taking the chosen capacity; will retry"
    Cluster.objects.filter(id=cluster_id, state=Cluster.State.QUEUED).update(reason=message)
    return Rejection(cluster_id, "contention", message)


def _reject(cluster_id: int, rejected: _Rejected) -> Rejection:
    """Record why, if the cluster is still queued; quota, reuse and network problems will not
    fix themselves, so those fail it."""
    cause, message = rejected.cause, rejected.message
    with transaction.atomic():
        if cause in ("quota", "reuse", "network"):
            fail(cluster_id, Cluster.State.QUEUED, message)
        elif (
            Cluster.objects.filter(id=cluster_id, state=Cluster.State.QUEUED)
            .exclude(reason=message)
            .update(reason=message)
        ):
            record_event(cluster_id, f"waiting: {message}")
    return Rejection(cluster_id, cause, message, quota=rejected.quota)


def fail(cluster_id: int, sources: str | Collection[str], why: str, **release_options: Any) -> bool:
    """The one way a cluster fails, used by the reservation, the admission queue and the
    operations runner (workers.operations.fail, which removes its containers first, and the
    reconciler through it): if it is still in one of `sources`, under its row lock, it moves
    to failed with `why` (an error event), everything it held is given back with its data
    kept (release(); `release_options` go to it) and its instances forget their containers.
    Exactly once: False, and nothing done, when it already left `sources`."""
    sources = (sources,) if isinstance(sources, str) else tuple(sources)
    with transaction.atomic():
        locked = Cluster.objects.select_for_update().filter(id=cluster_id).first()
        if locked is None or locked.state not in sources:
            return False
        transition(cluster_id, locked.state, Cluster.State.FAILED, why)
        # Nothing a user owns is lost to a failure: the data stays for a reuse or a wipe.
        release(cluster_id, keep_data=True, **release_options)
        Instance.objects.filter(cluster_id=cluster_id).update(container_id="")
    return True


def _pipelined(*statements: tuple[str, Any] | tuple[str, Any, RowFactory[Any]]) -> list[list[Any]]:
    """Rows of each (sql, params) statement, all sent in one round trip and run in order; a
    third item, a psycopg row factory (e.g. dict_row), shapes that statement's rows."""
    conn = connection.connection  # the open connection of the current transaction
    # Prepared (planned once per connection) unless a transaction-mode pooler is configured,
    # which Django's DISABLE_SERVER_SIDE_CURSORS announces. Django switches psycopg's automatic
    # preparing off; an unreachable threshold keeps it off for every other query (Django's
    # client-side cursors never prepare anyway) while prepare=True still works for these.
    prepare = not connection.settings_dict.get("DISABLE_SERVER_SIDE_CURSORS")
    if prepare and conn.prepare_threshold is None:
        conn.prepare_threshold = sys.maxsize
    cursors = [  # server-side binding
        psycopg.Cursor(conn, row_factory=s[2] if len(s) > 2 else tuple_row) for s in statements
    ]
    with connection.wrap_database_errors:
        with conn.pipeline():
            for cursor, statement in zip(cursors, statements, strict=True):
                cursor.execute(statement[0], statement[1], prepare=prepare)
        return [cursor.fetchall() for cursor in cursors]


# Plan the prepared statements once and for all: the planner prefers planning again for each
# run when parameters are arrays or limits (their size is unknown to a generic plan), which
# would cost more than running them. Only prepared statements (only ours) are affected, and
# only in this transaction.
GENERIC_PLANS_SQL: tuple[str, list[Any]] = (
    "SELECT set_config('plan_cache_mode', 'force_generic_plan', true)",
    [],
)

# The cluster row, locked, with its instances (a LEFT JOIN: a cluster without any still
# comes back).
CLUSTER_SQL = """
SELECT c.owner_id, c.state, c.name, c.reuse_data_of_id,
       i.id, i.role, i.index, i.hostname, i.cores, i.memory_mb, i.disks, i.disk_kind
FROM clusters_cluster c LEFT JOIN clusters_instance i ON i.cluster_id = c.id
WHERE c.id = %s
ORDER BY i.id
FOR UPDATE OF c
"""


def _reserve_once(cluster_id: int) -> Reservation | Rejection:
    candidates_sql, candidates_params, kinds = placement.cluster_candidates_statement(cluster_id)
    _, rows, locked, usage, addresses, found = _pipelined(
        GENERIC_PLANS_SQL,
        (CLUSTER_SQL, [cluster_id]),
        *quotas.cluster_owner_statements(cluster_id),
        (TAKE_ADDRESSES_SQL, {"name": settings.SCHEDULER_NETWORK, "cluster": cluster_id}),
        (candidates_sql, candidates_params, dict_row),  # placement reads its rows by name
    )
    if not rows:
        raise Cluster.DoesNotExist(f"no cluster {cluster_id}")
    owner_id, state, name, reuse_of = rows[0][:4]
    if state != Cluster.State.QUEUED:
        return Rejection(cluster_id, "state", f"cluster is {state}, not queued")
    wants = [Want(*row[4:]) for row in rows if row[4] is not None]
    if not wants:
        raise _Rejected("capacity", "the cluster has no instances")

    problem = quotas.exceeded(
        Demand.of(wants), quotas.scopes_of(locked), quotas.usage_by_scope(usage)
    )
    if problem is not None:
        raise _Rejected("quota", str(problem), problem)
    address_ids = _enough_addresses(addresses, len(wants), cluster_id)

    if reuse_of:
        plan = _reuse_plan(reuse_of, owner_id, wants)
        if isinstance(plan, str):
            raise _Rejected("reuse", plan)
        node_of: dict[int, Any] | None = {
            w.id: node_id for w, (node_id, _) in zip(wants, plan, strict=True)
        }
        reused = {w.id: disk_ids for w, (_, disk_ids) in zip(wants, plan, strict=True)}
    else:
        node_of = placement.assign(wants, placement.parse(found, kinds))
        if node_of is None:
            raise _Rejected("capacity", _shortage_message(wants))
        reused = {}
    return _take(cluster_id, name, wants, node_of, address_ids, reused)


# The cluster's addresses, one per instance if it is still queued, marked held in the same
# statement. They come from the first free isolated network (a segment of the cluster's own,
# taken in the CTE: SKIP LOCKED lets parallel reservations take different segments, and a
# segment another one took meanwhile fails `holder_id IS NULL` on the re-check), else from
# the shared network (SCHEDULER_NETWORK by name, else the first one). Networks are looked up
# inside the statement, so a renamed or new network needs no cache invalidation. Matching with
# IN and ordering by (network, id) leaves the partial index of free addresses as the only
# ordered path: with `=` and ORDER BY id the planner walks the primary key past every held
# address. ARRAY() keeps the outer plan an id lookup.
TAKE_ADDRESSES_SQL = """
WITH segment AS (
    UPDATE inventory_network SET holder_id = %(cluster)s
    WHERE id = (
        SELECT id FROM inventory_network WHERE isolated AND holder_id IS NULL
        ORDER BY id LIMIT 1 FOR UPDATE SKIP LOCKED
    ) AND EXISTS (SELECT 1 FROM clusters_cluster WHERE id = %(cluster)s AND state = 'queued')
    RETURNING id
)
UPDATE inventory_address SET held = true
WHERE id = ANY(ARRAY(
    SELECT a.id FROM inventory_address a
    WHERE NOT a.held AND a.network_id IN (
        SELECT COALESCE(
            (SELECT id FROM segment),
            (SELECT id FROM inventory_network
             WHERE NOT isolated AND (%(name)s::text = '' OR name = %(name)s::text)
             ORDER BY id LIMIT 1)
        )
    )
    ORDER BY a.network_id, a.id
    LIMIT (SELECT COUNT(*) FROM clusters_instance i JOIN clusters_cluster c ON c.id = i.cluster_id
           WHERE c.id = %(cluster)s AND c.state = 'queued')
    FOR UPDATE SKIP LOCKED
))
RETURNING id
"""


def _enough_addresses(rows: list[tuple], count: int, cluster_id: int) -> list[int]:
    addresses = sorted(row[0] for row in rows)
    if len(addresses) >= count:
        return addresses
    segments = Network.objects.filter(isolated=True)
    taken = segments.filter(holder_id=cluster_id).first()
    if taken is not None:
        raise _Rejected(
            "capacity", f"needs {count} addresses; network {taken.name} has {len(addresses)}"
        )
    if segments.exists() and not segments.filter(holder__isnull=True).exists():
        raise _Rejected(
            "capacity", f"all {segments.count()} cluster networks are in use; waits for one to free"
        )
    network = cluster_network()
    if network is None:
        raise _Rejected("network", "no network is configured for cluster addresses")
    raise _Rejected("capacity", f"needs {count} addresses on {network.name}; {len(addresses)} free")


LOCK_NODES_SQL = (
    "SELECT id, state FROM inventory_node WHERE id = ANY(%s::bigint[]) ORDER BY id FOR UPDATE"
)

# Writes a whole reservation: `held` pairs each instance with its disks (locked there), the
# disks become allocated (handing over any data they kept), instances take node, address and
# hostname, allocations are recorded, and the cluster moves to placing with its event. The
# partial unique constraints make it fail loudly if anything is already held. Returns the disk
# ids of each instance; fewer than asked means someone else took or failed one meanwhile.
WRITE_SQL = """
WITH want AS (
    SELECT * FROM json_to_recordset(%(want)s::json) AS w(
        n int, instance_id bigint, node_id bigint, address_id bigint, hostname text,
        kind text, count int
    )
),
{held},
taken AS (
    UPDATE inventory_disk d SET state = 'allocated' FROM held WHERE d.id = held.disk_id
    RETURNING d.id
),
handed_over AS (
    UPDATE clusters_diskallocation a SET data_kept = false, handed_over = true
    FROM taken WHERE a.data_kept AND a.disk_id = taken.id
),
placed AS (
    UPDATE clusters_instance i
    SET node_id = w.node_id, address_id = w.address_id, hostname = w.hostname,
        active = true, state = %(reserved)s
    FROM want w WHERE i.id = w.instance_id
      AND i.id = ANY(ARRAY(SELECT instance_id FROM want))  -- an id lookup, never a table scan
),
allocated AS (
    INSERT INTO clusters_diskallocation (disk_id, instance_id, active, data_kept, created)
    SELECT disk_id, instance_id, true, false, %(now)s FROM held
),
{transition}
SELECT instance_id, array_agg(disk_id ORDER BY disk_id) FROM held GROUP BY instance_id
"""
# Per node and kind, the first available disks, those keeping someone's data last; rows
# another transaction has locked are skipped (it is taking or failing them). Each instance
# gets the ranks [first, first + count) of its node and kind.
PICK_HELD = """slot AS (
    SELECT instance_id, node_id, kind, count,
           SUM(count) OVER (PARTITION BY node_id, kind ORDER BY n) - count AS first
    FROM want
),
picked AS (
    SELECT d.id, need.node_id, need.kind,
           row_number() OVER (PARTITION BY need.node_id, need.kind ORDER BY d.kept, d.id) - 1
               AS rank
    FROM (SELECT node_id, kind, SUM(count) AS count FROM want GROUP BY node_id, kind) need
    CROSS JOIN LATERAL (
        SELECT d.id, a.id IS NOT NULL AS kept  -- at most one kept dataset per disk
        FROM inventory_disk d
        LEFT JOIN clusters_diskallocation a ON a.disk_id = d.id AND a.data_kept
        WHERE d.node_id = need.node_id AND d.kind = need.kind AND d.state = 'available'
        ORDER BY kept, d.id LIMIT need.count
        FOR UPDATE OF d SKIP LOCKED
    ) d
),
held AS (
    SELECT s.instance_id, p.id AS disk_id FROM slot s JOIN picked p
    ON p.node_id = s.node_id AND p.kind = s.kind
       AND p.rank >= s.first AND p.rank < s.first + s.count
)"""
# The disks the reused cluster's instances kept, if they still are available and keep it.
REUSE_HELD = """held AS (
    SELECT r.instance_id, d.id AS disk_id
    FROM json_to_recordset(%(reused)s::json) AS r(instance_id bigint, disk_id bigint)
    JOIN inventory_disk d ON d.id = r.disk_id
    WHERE d.state = 'available'
      AND EXISTS (SELECT 1 FROM clusters_diskallocation a WHERE a.disk_id = d.id AND a.data_kept)
    FOR UPDATE OF d
)"""


def _take(cluster_id, name, wants, node_of, addresses, reused, moving=True) -> Reservation:
    """Lock the chosen nodes, check they still have room, and write it all (one round trip;
    the writes roll back with the transaction when the check fails). `moving`: the cluster
    moves from queued to placing in the same statement (not for a resize's added instances)."""
    node_ids = sorted(set(node_of.values()))
    free_sql, free_params, kinds = placement.free_statement(node_ids, {w.disk_kind for w in wants})
    # The instances as JSON records: one parameter instead of an array per column.
    want = [
        {
            "n": n,
            "instance_id": w.id,
            "node_id": node_of[w.id],
            "address_id": address_id,
            "hostname": w.hostname or f"{name}-{w.role}-{w.index}"[:63],
            "kind": w.disk_kind,
            "count": w.disks,
        }
        for n, (w, address_id) in enumerate(zip(wants, addresses, strict=True))
    ]
    pairs = [{"instance_id": i, "disk_id": d} for i, ids in reused.items() for d in ids]
    sql, params = _write_statement(cluster_id, bool(reused), moving)
    params |= {
        "want": json.dumps(want),
        "reused": json.dumps(pairs),
        "reserved": Instance.State.RESERVED.value,
    }
    states, free, held = _pipelined(
        (LOCK_NODES_SQL, [node_ids]),
        (free_sql, free_params, dict_row),
        (sql, params),
    )
    if [s for _, s in states] != [Node.State.ACTIVE] * len(node_ids):
        raise _Raced  # drained meanwhile: plan again (a reuse plan then names the node)
    _recheck(wants, node_of, placement.parse(free, kinds), reuse=bool(reused))
    disks_of = dict(held)
    if any(len(disks_of.get(w.id, ())) != w.disks for w in wants):
        raise _Raced  # e.g. an admin is marking one of them failed right now
    placements = [
        Placement(w.id, node_of[w.id], tuple(disks_of.get(w.id, ())), address_id)
        for w, address_id in zip(wants, addresses, strict=True)
    ]
    return Reservation(cluster_id, placements)


def _write_statement(cluster_id: int, reuse: bool, moving: bool = True) -> tuple[str, dict]:
    if not moving:  # instances added to a cluster that keeps its state
        return _write_sql("stays AS (SELECT 1)", reuse), {"now": timezone.now()}
    ctes, params = transition_ctes(cluster_id, Cluster.State.QUEUED, Cluster.State.PLACING)
    return _write_sql(ctes, reuse), params


# Addresses for a resize's added instances, on the network the cluster's instances already
# use (its own segment, or the shared network), marked held in the same statement.
ADD_ADDRESSES_SQL = """
UPDATE inventory_address SET held = true
WHERE id = ANY(ARRAY(
    SELECT a.id FROM inventory_address a
    WHERE NOT a.held AND a.network_id IN (
        SELECT h.network_id FROM clusters_instance i
        JOIN inventory_address h ON h.id = i.address_id
        WHERE i.cluster_id = %(cluster)s AND i.active
    )
    ORDER BY a.network_id, a.id
    LIMIT %(count)s
    FOR UPDATE SKIP LOCKED
))
RETURNING id
"""


def reserve_added(cluster_id: int, instance_ids: list[int]) -> Reservation | Rejection:
    """Reserve the instances a resize adds to a cluster in `state`, all or nothing, under the
    same quota, node and disk rules (and the same statements) as a launch; their addresses
    come from the network its instances already use. The cluster keeps its state; nothing is
    taken on a Rejection."""
    for _attempt in range(settings.SCHEDULER_RESERVE_ATTEMPTS):
        try:
            with transaction.atomic():
                return _reserve_added_once(cluster_id, sorted(instance_ids))
        except _Raced:
            continue
        except _Rejected as rejected:  # rolled back: whatever was taken is given back
            return Rejection(cluster_id, rejected.cause, rejected.message, quota=rejected.quota)
    message = "concurrent reservations kept taking the chosen capacity"
    return Rejection(cluster_id, "contention", message)


def _reserve_added_once(cluster_id: int, instance_ids: list[int]) -> Reservation | Rejection:
    from .resize import Growth  # resize reads the catalog; reservation need not at import

    pending = Instance.objects.filter(id__in=instance_ids, cluster_id=cluster_id, active=False)
    found_wants = [
        Want(i.id, i.role, i.index, i.hostname, i.cores, i.memory_mb, i.disks, i.disk_kind)
        for i in pending.order_by("id")
    ]
    if len(found_wants) != len(instance_ids):
        return Rejection(cluster_id, "state", "the added instances are reserved already")
    statement = placement.candidates_statement(found_wants)
    if statement is None:
        raise _Rejected("capacity", _shortage_message(found_wants))
    candidates_sql, candidates_params, kinds = statement
    _, rows, locked, usage, addresses, found = _pipelined(
        GENERIC_PLANS_SQL,
        (CLUSTER_SQL, [cluster_id]),
        *quotas.cluster_owner_statements(cluster_id, counting_it=True),
        (ADD_ADDRESSES_SQL, {"cluster": cluster_id, "count": len(found_wants)}),
        (candidates_sql, candidates_params, dict_row),  # placement reads its rows by name
    )
    if not rows:
        raise Cluster.DoesNotExist(f"no cluster {cluster_id}")
    state, name = rows[0][1:3]
    if state != Cluster.State.RESIZING:
        return Rejection(cluster_id, "state", f"cluster is {state}, not resizing")
    problem = quotas.exceeded(
        Growth.of(found_wants), quotas.scopes_of(locked), quotas.usage_by_scope(usage)
    )
    if problem is not None:
        raise _Rejected("quota", str(problem), problem)
    address_ids = _enough_addresses(addresses, len(found_wants), cluster_id)
    node_of = placement.assign(found_wants, placement.parse(found, kinds))
    if node_of is None:
        raise _Rejected("capacity", _shortage_message(found_wants))
    return _take(cluster_id, name, found_wants, node_of, address_ids, {}, moving=False)


@functools.cache
def _write_sql(transition: str, reuse: bool) -> str:
    return WRITE_SQL.format(held=REUSE_HELD if reuse else PICK_HELD, transition=transition)


def _recheck(wants: list[Want], node_of: dict, free: list, reuse: bool) -> None:
    """What the locked nodes had free before this reservation still fits all of it."""
    by_node = {f.node_id: f for f in free}
    for want in wants:
        node = by_node[node_of[want.id]]
        if reuse:  # reused disks are counted by _reuse_plan; only cores and memory here
            node.disks[want.disk_kind] = node.disks.get(want.disk_kind, 0) + want.disks
        if not node.fits(want):
            raise _Raced
        node.take(want)


def _shortage_message(wants: list[Want]) -> str:
    biggest = max(wants, key=lambda w: (w.disks, w.cores, w.memory_mb))
    kind = biggest.disk_kind
    total = sum(w.disks for w in wants if w.disk_kind == kind)
    best = placement.best_offer()
    where = f"on {len(wants)} distinct nodes" if settings.SCHEDULER_SPREAD else "in total"
    return (
        f"needs {total} free {kind.upper()} disks {where} ({biggest.disks} per instance, "
        f"with {biggest.cores} cores and {biggest.memory_mb} MB); best node has "
        f"{best.disks.get(kind, 0)} free {kind.upper()} disks, {best.cores} cores and "
        f"{best.memory_mb} MB"
    )


def _reuse_plan(previous_id: int, owner_id: int, wants: list[Want]) -> list | str:
    """[(node_id, [disk ids])] matching the previous cluster instance by instance, or a
    message naming why the data cannot be reused."""
    previous = Cluster.objects.get(id=previous_id)
    if previous.owner_id != owner_id:
        return f"cluster {previous.name} belongs to someone else"
    if previous.state != Cluster.State.DESTROYED:
        return f"cluster {previous.name} is {previous.state}; only destroyed clusters' data"
    old = {(i.role, i.index): i for i in previous.instances.select_related("node")}
    plan = []
    for want in wants:
        before = old.get((want.role, want.index))
        name = f"{want.role}-{want.index}"
        if before is None or before.node is None:
            return f"{previous.name} had no instance {name}"
        kept = list(
            DiskAllocation.objects.filter(instance=before, data_kept=True)
            .select_related("disk")
            .order_by("disk_id")
        )
        if not kept:
            return f"the data of {name} was wiped or its disks were given to another cluster"
        if len(kept) != want.disks:
            return f"{name} had {len(kept)} disks; asked for {want.disks}"
        if before.node.state != Node.State.ACTIVE:
            return f"node {before.node.name} holding {name}'s data is {before.node.state}"
        for allocation in kept:
            if allocation.disk.state != Disk.State.AVAILABLE:
                return f"disk {allocation.disk} holding {name}'s data is {allocation.disk.state}"
            if allocation.disk.kind != want.disk_kind:  # quotas count disks by the asked kind
                return (
                    f"disk {allocation.disk} holding {name}'s data is "
                    f"{allocation.disk.kind.upper()}; asked for {want.disk_kind.upper()}"
                )
        plan.append((before.node_id, [a.disk_id for a in kept]))
    return plan


def release(cluster_id: int, keep_data: bool = True, unconfirmed: Collection[int] = ()) -> int:
    """Give back everything the cluster's instances hold; kept disks remember their last
    holder for a later reuse. Returns the number of disks released. Queued clusters are
    offered the freed capacity once this commits. The address, disks and segment of the
    instances in `unconfirmed` (ids whose containers could not be removed) stay held until
    those containers are seen gone (apps.clusters.leftovers)."""
    with transaction.atomic():
        Cluster.objects.select_for_update().filter(id=cluster_id).first()
        held = leftovers.hold(cluster_id, unconfirmed)
        allocations = DiskAllocation.objects.filter(instance__cluster_id=cluster_id, active=True)
        disk_ids = list(allocations.values_list("disk_id", flat=True))
        allocations.update(active=False, released=timezone.now(), data_kept=keep_data)
        Disk.objects.filter(id__in=disk_ids, state=Disk.State.ALLOCATED).exclude(
            id__in=held.disks
        ).update(state=Disk.State.AVAILABLE)
        holders = Instance.objects.filter(cluster_id=cluster_id, active=True)
        address_ids = list(holders.exclude(address=None).values_list("address_id", flat=True))
        freed = holders.update(active=False, state=Instance.State.RELEASED)
        Address.objects.filter(id__in=address_ids).exclude(id__in=held.addresses).update(held=False)
        Network.objects.filter(holder_id=cluster_id).exclude(id__in=held.segments).update(
            holder=None
        )
        if freed or disk_ids:
            kept = "kept" if keep_data else "wiped"
            still = f"; {leftovers.describe(held)}" if held else ""
            record_event(
                cluster_id,
                f"released {freed} instances and {len(disk_ids)} disks (data {kept}){still}",
            )
            wakeup.wake_queue("release")
    return len(disk_ids)
