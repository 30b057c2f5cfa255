"""Helper containers (disk probes, wipes, disk benchmarks) and the operation each one serves.

An operation that starts a helper holds a PostgreSQL advisory lock while it runs (a cluster
operation its cluster's lock, a benchmark its node's), tied to the worker's database session.
The helper carries that lock's keys in a label, so the reconciler tells a long wipe from a
leftover by asking the database: it removes a helper only once nobody holds that lock (the
operation ended, or its worker died). A helper without such a label (a disk probe: seconds) is
a leftover only once older than the longest run_helper waits for one.
"""

from django.conf import settings

from portal import locks

HELPER = "platter.helper"  # what the helper does: wipe, bench, probe
LOCK = "platter.lock"  # "namespace:key" of the advisory lock its operation holds


def serving(purpose: str, namespace: int, key: int, **about: object) -> dict[str, str]:
    """The labels of a helper started by an operation holding the advisory lock
    (namespace, key); `about` names what it works for (cluster=42, disk=7), for people."""
    labels = {HELPER: purpose, LOCK: f"{namespace}:{key}"}
    labels.update({f"platter.{name}": str(value) for name, value in about.items()})
    return labels


def in_use(labels: dict[str, str], age: float) -> bool:
    """Whether the operation that started this helper may still be running."""
    lock = labels.get(LOCK, "")
    namespace, _, key = lock.partition(":")
    if namespace.isdigit() and key.isdigit():
        return locks.held(int(namespace), int(key))
    # No operation named: run_helper waits this long for it, then removes it itself.
    return age < settings.NODE_HELPER_TIMEOUT
