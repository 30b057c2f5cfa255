"""Putting the perimeter's rules (apps/clusters/perimeter.py) on the nodes.

The rules of a node are read from the database in the calling thread, then loaded on every
node at once (apps.nodes.parallel: a silent node costs its timeout, not everyone's). What a
node was last given is remembered for PERIMETER_REFRESH_SECONDS (the cache): `refresh` loads
a node's rules again when they changed or that time has passed, so a node that came back
without them (a reboot, a flush by hand) gets them within one reconcile pass after it.
"""

import contextlib
import logging
from collections.abc import Iterator

from django.conf import settings
from django.core.cache import cache

from apps import nodes
from apps.clusters.perimeter import NodeRules, node_rules
from apps.inventory.models import Node
from apps.nodes import NodeError, parallel
from portal import locks

log = logging.getLogger(__name__)
# How long an operation waits for another's load of the same node (a helper run each).
LOCK_SECONDS = 60


def _key(node: Node) -> str:
    return f"perimeter:{settings.PLATTER_SITE}:{node.id}"


def apply(targets: list[Node]) -> dict[str, NodeError]:
    """Load each node's rules now; returns the nodes that failed, by name, with why."""
    with _locked(targets) as busy:
        ready = [node for node in targets if node.name not in busy]
        rules = [node_rules(node) for node in ready]  # read under the nodes' locks
        outcomes = parallel(_load, list(zip(ready, rules, strict=True)))
    failed: dict[str, NodeError] = dict(busy)
    for node, node_rule, outcome in zip(ready, rules, outcomes, strict=True):
        if isinstance(outcome, Exception):
            failed[node.name] = (
                outcome if isinstance(outcome, NodeError) else NodeError(node.name, str(outcome))
            )
            cache.delete(_key(node))
            log.warning("perimeter not applied on %s: %s", node.name, outcome)
        else:
            # A node with nothing to guard holds no table: nothing there to lose to a reboot.
            keep = settings.PERIMETER_REFRESH_SECONDS if node_rule.guarded else None
            cache.set(_key(node), node_rule.digest(), timeout=keep)
    return failed


@contextlib.contextmanager
def _locked(targets: list[Node]) -> Iterator[dict[str, NodeError]]:
    """Each node's rules are read and loaded under that node's lock: two operations loading
    one node at once could otherwise land the older view last, leaving an instance placed in
    between unguarded. Yields the nodes whose lock another holder kept past LOCK_SECONDS."""
    busy: dict[str, NodeError] = {}
    with contextlib.ExitStack() as held:
        for node in sorted(targets, key=lambda n: n.id):  # one order: no deadlock
            lock = locks.advisory_lock(locks.PERIMETER, node.id, wait=LOCK_SECONDS)
            if not held.enter_context(lock):
                busy[node.name] = NodeError(
                    node.name, "its firewall rules are being loaded by another operation", True
                )
        yield busy


def _load(job: tuple[Node, NodeRules]) -> None:
    node, rules = job
    nodes.client(node).set_firewall(rules.script())


def ensure(targets: list[Node]) -> None:
    """Before containers start on these nodes: their rules are loaded, or the NodeError of the
    first node that refused or did not answer is raised (no container starts unguarded)."""
    failed = apply(targets)
    if failed:
        raise next(iter(failed.values()))


def refresh(targets: list[Node]) -> list[str]:
    """Load the rules of the nodes whose rules changed, or were loaded longer ago than
    PERIMETER_REFRESH_SECONDS; returns the names of the nodes loaded."""
    stale = [node for node in targets if cache.get(_key(node)) != node_rules(node).digest()]
    failed = apply(stale) if stale else {}
    return [node.name for node in stale if node.name not in failed]


def forget(targets: list[Node]) -> None:
    """The next refresh loads these nodes' rules whatever it remembers (a node restarted)."""
    cache.delete_many([_key(node) for node in targets])
