"""How long a cluster took from the launch request to `running`, and where the time went.

Read from the cluster's state events (each transition logs one, in the same statement that
moves the cluster), so a launch that went back to the queue (a node failed mid-placement) or
a restart later does not hide the first launch's phases: every period in queued, placing and
configuring before the first `running` counts.
"""

from dataclasses import dataclass, field
from datetime import datetime

from django.utils import timezone

from . import states
from .models import Cluster, ClusterEvent

S = Cluster.State
PHASES = states.PHASES
STATES = {str(state) for state in S}


@dataclass
class Provisioning:
    """Seconds per phase (so far, while the launch goes on) and in all; `done` once running."""

    phases: dict[str, float] = field(default_factory=dict)
    total: float = 0.0
    done: bool = False

    def as_dict(self) -> dict:
        return {
            "seconds": round(self.total, 1),
            "running": self.done,
            "phases": {phase: round(seconds, 1) for phase, seconds in self.phases.items()},
        }


def _state_of(event: ClusterEvent) -> str | None:
    """The state a transition's event names ("placing", "failed: why"), else None."""
    head = event.message.split(":", 1)[0]
    return head if head in STATES else None


def launch_provisioning(cluster: Cluster, now: datetime | None = None) -> Provisioning | None:
    """The first launch's timeline; None for a cluster with no state events (never launched)."""
    changes = [
        (state, event.at)
        # In (at, id) order (ClusterEvent.Meta); the API's detail query prefetched them.
        for event in cluster.events.all()
        if (state := _state_of(event)) is not None
    ]
    if not changes:
        return None
    result = Provisioning(phases={str(phase): 0.0 for phase in PHASES})
    (current, since), start = changes[0], changes[0][1]
    for state, at in changes[1:]:
        if current in result.phases:
            result.phases[current] += (at - since).total_seconds()
        current, since = state, at
        if state == S.RUNNING:
            result.done = True
            result.total = (at - start).total_seconds()
            return result
        if state not in result.phases:  # failed, stopping, destroying: the launch ended
            result.total = (at - start).total_seconds()
            return result
    end = now or timezone.now()
    if current in result.phases:
        result.phases[current] += (end - since).total_seconds()
    result.total = (end - start).total_seconds()
    return result
