"""PostgreSQL advisory locks: the one helper every lock of the portal goes through, and the
namespaces they use.

A lock is (namespace, key): the namespace says what kind of thing is locked, the key which one
(a cluster's id, a node's, a user's). A session lock (``advisory_lock``) is tied to the
holder's database session, so a killed worker never leaves one held; a transaction lock
(``transaction_lock``) ends with its transaction. Advisory locks belong to one database:
``held`` looks only at this one, since several portals may share a PostgreSQL server.

This module imports nothing of the repository, so any app or worker may use it."""

import contextlib
import time
from collections.abc import Iterator

from django.db import connection

CLUSTER = 7217  # a cluster's operation (workers/operations.py); key: the cluster's id
BENCHMARK = 7218  # a disk benchmark on a node (apps/inventory/benchmarks.py); key: the node's id
SSH_KEYS = 7219  # a user's ssh key sync (workers/ssh_keys.py); key: the user's id
JOB_ADMISSION = 7220  # the jobs' admission pass (apps/jobs/admission.py); key: 0
PERIMETER = 7221  # a node's firewall rules computed and loaded (workers/perimeter.py); key: node

POLL_SECONDS = 0.2  # between tries while waiting for a session lock

HELD_SQL = """SELECT EXISTS (
    SELECT 1 FROM pg_locks
    WHERE locktype = 'advisory' AND granted AND objsubid = 2 AND classid = %s AND objid = %s
      AND database = (SELECT oid FROM pg_database WHERE datname = current_database())
)"""


@contextlib.contextmanager
def advisory_lock(namespace: int, key: int, wait: float = 0) -> Iterator[bool]:
    """Hold the session lock (namespace, key), waiting up to `wait` seconds for it; yields
    whether it was obtained (the caller decides what a busy lock means). Released on exit."""
    deadline = time.monotonic() + wait
    with connection.cursor() as cursor:
        while True:
            cursor.execute("SELECT pg_try_advisory_lock(%s, %s)", [namespace, key])
            got = bool(cursor.fetchone()[0])
            if got or time.monotonic() >= deadline:
                break
            time.sleep(POLL_SECONDS)
    try:
        yield got
    finally:
        if got:
            with connection.cursor() as cursor:
                cursor.execute("SELECT pg_advisory_unlock(%s, %s)", [namespace, key])


def transaction_lock(namespace: int, key: int) -> None:
    """Wait for the lock (namespace, key) and hold it until the current transaction ends
    (call it inside transaction.atomic)."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_advisory_xact_lock(%s, %s)", [namespace, key])


def held(namespace: int, key: int) -> bool:
    """Whether some session holds the lock (namespace, key), without taking it (a try-lock
    here could make an operation that does not wait think its target is busy)."""
    with connection.cursor() as cursor:
        cursor.execute(HELD_SQL, [namespace, key])
        return bool(cursor.fetchone()[0])
