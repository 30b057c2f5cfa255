"""Platter cluster states in the CESGA PaaS's status words.

CESGA's life cycle: registered (in the registry) -> scheduling / scheduled (Mesos placed the
nodes) -> configuring / configured (the orchestrator ran) -> ready; destroyed at the end.
Platter states with no CESGA counterpart (degraded, stopping, stopped, failed) keep their
own word, which CESGA scripts treat like any status that is not ready."""

from apps.clusters.models import Cluster
from apps.clusters.states import STATES

S = Cluster.State

WORDS: dict[str, str] = {state: row.cesga for state, row in STATES.items()}


def cesga_status(cluster: Cluster) -> str:
    if cluster.state == S.PLACING and _all_containers_created(cluster):
        return "scheduled"
    return WORDS[cluster.state]


def _all_containers_created(cluster: Cluster) -> bool:
    instances = list(cluster.instances.all())
    return bool(instances) and all(i.container_id for i in instances)
