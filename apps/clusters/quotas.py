"""Quota checks. Usage is derived from active allocations (and live clusters) every time.

A check is two statements, run in this order inside the transaction that takes the resources:
LOCK_SQL (the owner's user row, then the quotas that apply, in id order) and USAGE_SQL (usage
of every scope with a limit). They must stay two statements: under READ COMMITTED a statement
reads from a snapshot taken when it starts, so usage read in the locking statement could miss
what the previous lock holder committed while we waited. The reservation sends both in one
round trip (see reservation.py); the limits themselves are compared here, in Python.
"""

import functools
from collections.abc import Iterable
from dataclasses import dataclass

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import connection, models

from apps.accounts.models import LIMIT_FIELDS, Quota

from .models import LIVE_STATES

DISK_KINDS = ("hdd", "ssd", "nvme")


# What each limit counts, as the quota messages say it (one, several).
LIMIT_WORDS = {
    "max_clusters": ("cluster", "clusters"),
    "max_instances": ("instance", "instances"),
    "max_cores": ("core", "cores"),
    "max_memory_mb": ("MB of memory", "MB of memory"),
    "max_disks": ("disk", "disks"),
    **{f"max_disks_{k}": (f"{k.upper()} disk", f"{k.upper()} disks") for k in DISK_KINDS},
}


def amount(count: int, limit: str) -> str:
    """A count in the words of a limit: "8 cores", "1 HDD disk"."""
    one, several = LIMIT_WORDS.get(limit, (limit, limit))
    return f"{count} {one if count == 1 else several}"


class QuotaExceeded(PermissionError):
    """A request would take a user (or their group) over a limit: worth an HTTP 403.
    `limit` is the Quota field's name (the API's quota.limit); the message is in words."""

    def __init__(self, limit: str, asked: int, used: int, maximum: int, scope: str) -> None:
        self.limit, self.asked, self.used, self.maximum, self.scope = (
            limit,
            asked,
            used,
            maximum,
            scope,
        )
        super().__init__(
            f"the quota of {scope} is {amount(maximum, limit)}: {used} in use, {asked} more asked"
        )


@dataclass(frozen=True)
class Demand:
    """What one cluster asks for, in the units the limits use."""

    instances: int
    cores: int
    memory_mb: int
    disks_by_kind: dict[str, int]

    @classmethod
    def of(cls, instances: Iterable) -> "Demand":
        items = list(instances)
        by_kind: dict[str, int] = {}
        for item in items:
            by_kind[item.disk_kind] = by_kind.get(item.disk_kind, 0) + item.disks
        return cls(
            instances=len(items),
            cores=sum(i.cores for i in items),
            memory_mb=sum(i.memory_mb for i in items),
            disks_by_kind=by_kind,
        )

    def as_limits(self, clusters: int = 1) -> dict[str, int]:
        asked = {
            "max_clusters": clusters,
            "max_instances": self.instances,
            "max_cores": self.cores,
            "max_memory_mb": self.memory_mb,
            "max_disks": sum(self.disks_by_kind.values()),
        }
        for kind in DISK_KINDS:
            asked[f"max_disks_{kind}"] = self.disks_by_kind.get(kind, 0)
        return asked


def _tables() -> dict[str, str]:
    """Names to put in the SQL below: table and column names and constants, never input."""
    user_model = get_user_model()
    username = user_model._meta.get_field(user_model.USERNAME_FIELD)
    if not isinstance(username, models.Field) or username.column is None:
        raise TypeError(f"{user_model.USERNAME_FIELD} of {user_model} is no column")
    return {
        "users": user_model._meta.db_table,
        "username": username.column,
        "members": user_model.groups.through._meta.db_table,
        "quotas": Quota._meta.db_table,
        "groups": Quota._meta.get_field("group").related_model._meta.db_table,
        "limits": ", ".join(f"q.{name}" for name in LIMIT_FIELDS),
        "live": ", ".join(f"'{state}'" for state in LIVE_STATES),
    }


# Locks the user row, then the user's own quota and their groups' quotas in id order (the
# lateral runs after the user row is locked; LockRows sits above the sort). One row per quota,
# or one row of NULLs after the user name when there is none.
LOCK_SQL = """
WITH owner AS (SELECT id, {username} AS name FROM {users} WHERE id = {owner} FOR UPDATE)
SELECT owner.name, q.user_id, q.group_id, g.name, {limits}
FROM owner
LEFT JOIN LATERAL (
    SELECT q.id, q.user_id, q.group_id, {limits} FROM {quotas} q
    WHERE q.user_id = owner.id
       OR q.group_id IN (SELECT group_id FROM {members} WHERE user_id = owner.id)
    ORDER BY q.id
    FOR UPDATE
) q ON TRUE
LEFT JOIN {groups} g ON g.id = q.group_id
ORDER BY q.id
"""

# Usage per scope, one row each: (group id or NULL for the user, clusters, instances, cores,
# memory, disks, disks per kind), in one pass over the scope's live clusters. Instances count
# while active ({counted}; "committed" usage also counts queued clusters' instances and the
# pending ones a resize or an added notebook is waiting to reserve). An active
# instance holds exactly `disks` disks of `disk_kind` (the reservation allocates them, a reuse
# plan checks count and kind, release frees both together), so disks are counted from the
# instance rows without visiting every allocation. Each cluster's instances are summed by a
# lateral lookup on the cluster_id index: a plain join lets the planner hash the whole instance
# table (history included) when it guesses an owner has many clusters. {scopes} yields
# (group_id, owners[]) rows.
USAGE_SQL = """
WITH scope AS ({scopes})
SELECT s.group_id, u.*
FROM scope s
CROSS JOIN LATERAL (
    SELECT COUNT(*), COALESCE(SUM(i.instances), 0), COALESCE(SUM(i.cores), 0),
           COALESCE(SUM(i.memory), 0), COALESCE(SUM(i.disks), 0), {kind_sums}
    FROM clusters_cluster c
    CROSS JOIN LATERAL (
        SELECT COUNT(*) FILTER (WHERE {counted}) AS instances,
               SUM(i.cores) FILTER (WHERE {counted}) AS cores,
               SUM(i.memory_mb) FILTER (WHERE {counted}) AS memory,
               SUM(i.disks) FILTER (WHERE {counted}) AS disks, {kinds}
        FROM clusters_instance i WHERE i.cluster_id = c.id AND {holding}
    ) i
    WHERE c.owner_id = ANY(s.owners) AND c.state IN ({live})
      AND c.id IS DISTINCT FROM %(exclude)s::bigint
) u
"""
SCOPES = {
    # The user, and every group of theirs that has a quota.
    "owner": (
        "SELECT NULL::bigint AS group_id, ARRAY[{owner}::bigint] AS owners"
        " UNION ALL SELECT q.group_id, ARRAY(SELECT m.user_id FROM {members} m"
        " WHERE m.group_id = q.group_id) FROM {quotas} q"
        " JOIN {members} mine ON mine.group_id = q.group_id AND mine.user_id = {owner}"
    ),
    "user": "SELECT NULL::bigint AS group_id, ARRAY[{owner}::bigint] AS owners",
    "group": (
        "SELECT {owner}::bigint AS group_id,"
        " ARRAY(SELECT user_id FROM {members} WHERE group_id = {owner}) AS owners"
    ),
}


@dataclass(frozen=True)
class Scope:
    """Limits that apply to one user (their own, or the defaults) or one group of theirs."""

    name: str
    group_id: int | None
    limits: dict[str, int | None]


# Who the statements below are about: the user (or group) id given as a parameter, or the
# owner of a cluster, for statements sent before the cluster row has been read (in the same
# round trip, after the statement locking it).
GIVEN_OWNER = "%(owner)s"
OWNER_OF_CLUSTER = "(SELECT owner_id FROM clusters_cluster WHERE id = %(cluster)s)"


@functools.cache
def _lock_sql(owner: str = GIVEN_OWNER) -> str:
    return LOCK_SQL.format(**_tables(), owner=owner)


def lock_statement(user_id: int) -> tuple[str, dict]:
    return _lock_sql(), {"owner": user_id}


def cluster_owner_statements(cluster_id: int, counting_it: bool = False) -> list[tuple[str, dict]]:
    """lock_statement() and usage_statement() for the owner of the cluster, looked up by the
    statements themselves; the cluster's own instances count only `counting_it` (a grow: what
    it holds already stays held; a queued cluster holds nothing)."""
    params = {"cluster": cluster_id, "exclude": None if counting_it else cluster_id}
    usage = _usage_sql("owner", committed=False, owner=OWNER_OF_CLUSTER)
    return [(_lock_sql(OWNER_OF_CLUSTER), params), (usage, params)]


def scopes_of(rows: list[tuple]) -> list[Scope]:
    """LOCK_SQL rows as scopes: the user first, then their groups' quotas in id order."""
    username = rows[0][0]
    own = next((row for row in rows if row[1] is not None), None)
    limits = _limits(own) if own else default_limits()
    scopes = [Scope(f"user {username}", None, limits)]
    for row in rows:
        if row[2] is not None:
            scopes.append(Scope(f"group {row[3]}", row[2], _limits(row)))
    return scopes


def _limits(row: tuple) -> dict[str, int | None]:
    return dict(zip(LIMIT_FIELDS, row[4:], strict=True))


@functools.cache
def _usage_sql(scopes: str, committed: bool, owner: str = GIVEN_OWNER) -> str:
    tables = _tables()
    # A grow accepted (a resize, a notebook) counts from its request on, as a queued cluster
    # does: a launch accepted after it must not take the room its instances were promised.
    counted = "(i.active OR c.state = 'queued' OR i.state = 'pending')" if committed else "i.active"
    # Only committed usage needs a queued cluster's instances: a queued cluster holds nothing
    # (the reservation activates instances as it moves the cluster on, and a cluster goes back
    # to queued only after release), so its instances are not even looked up.
    holding = "TRUE" if committed else "c.state <> 'queued'"
    return USAGE_SQL.format(
        holding=holding,
        scopes=SCOPES[scopes].format(**tables, owner=owner),
        live=tables["live"],
        counted=counted,
        kinds=", ".join(
            f"SUM(i.disks) FILTER (WHERE {counted} AND i.disk_kind = '{kind}') AS {kind}"
            for kind in DISK_KINDS
        ),
        kind_sums=", ".join(f"COALESCE(SUM(i.{kind}), 0)" for kind in DISK_KINDS),
    )


def usage_statement(
    owner_id: int,
    exclude_cluster: int | None = None,
    scopes: str = "owner",
    committed: bool = False,
) -> tuple[str, dict]:
    """USAGE_SQL for the user and their groups with a quota (or only the user, or a group):
    what their instances hold, or with `committed` also what their queued clusters will."""
    return _usage_sql(scopes, committed), {"owner": owner_id, "exclude": exclude_cluster}


def usage_by_scope(rows: list[tuple]) -> dict[int | None, dict[str, int]]:
    """USAGE_SQL rows as {group id or None for the user: {limit name: used}}."""
    return {row[0]: dict(zip(LIMIT_FIELDS, row[1:], strict=True)) for row in rows}


def exceeded(
    demand: Demand, scopes: list[Scope], usage: dict[int | None, dict[str, int]]
) -> QuotaExceeded | None:
    """The first limit the demand would break, scope by scope, or None."""
    asked = demand.as_limits()
    for scope in scopes:
        used = usage[scope.group_id]
        for name in LIMIT_FIELDS:
            maximum = scope.limits.get(name)
            if maximum is None or asked[name] == 0:
                continue
            if used[name] + asked[name] > maximum:
                return QuotaExceeded(name, asked[name], used[name], maximum, scope.name)
    return None


def _fetch(statement: tuple[str, dict]) -> list[tuple]:
    with connection.cursor() as cursor:
        cursor.execute(*statement)
        return cursor.fetchall()


def user_usage(
    user_id: int, exclude_cluster: int | None = None, committed: bool = False
) -> dict[str, int]:
    """Current usage of the user's live clusters, per limit (see usage_statement)."""
    statement = usage_statement(user_id, exclude_cluster, "user", committed)
    return usage_by_scope(_fetch(statement))[None]


def usage_of(quota: Quota, committed: bool = False) -> dict[str, int]:
    """What the holder of `quota` (its user or its group) uses."""
    if quota.user_id is not None:
        return user_usage(quota.user_id, committed=committed)
    if quota.group_id is not None:
        return group_usage(quota.group_id, committed=committed)
    raise ValueError(f"quota {quota.pk} has neither a user nor a group")


def group_usage(
    group_id: int, exclude_cluster: int | None = None, committed: bool = False
) -> dict[str, int]:
    """Current usage of the live clusters of every member of the group, per limit."""
    rows = _fetch(usage_statement(group_id, exclude_cluster, "group", committed))
    return usage_by_scope(rows)[group_id]


def default_limits() -> dict[str, int | None]:
    configured = settings.SCHEDULER_DEFAULT_QUOTA
    return {name: configured.get(name) for name in LIMIT_FIELDS}


def check_quota(user_id: int, demand: Demand, exclude_cluster: int | None = None) -> None:
    """Raise QuotaExceeded naming the first limit a new cluster's demand would break, counting
    the user's queued clusters as if they ran: what is accepted now can all run together, so a
    queued cluster is not failed later for a quota it fit when it was accepted. Call inside the
    transaction that creates the cluster: the locks keep the check true until commit."""
    rows = _fetch(lock_statement(user_id))
    if not rows:
        raise get_user_model().DoesNotExist(f"no user {user_id}")
    usage = usage_by_scope(_fetch(usage_statement(user_id, exclude_cluster, committed=True)))
    problem = exceeded(demand, scopes_of(rows), usage)
    if problem is not None:
        raise problem
