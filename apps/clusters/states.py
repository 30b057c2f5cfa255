"""The cluster life cycle in two tables: what each state means, and which operation carries a
cluster through which states.

Every rule that groups states is read from these tables: the moves the state machine allows
(transitions.ALLOWED), quotas and leases (live), the pages that poll (moving), the
reconciler's watch (watched), logs (containers, logs), the launch's timeline (phase), CESGA's
status words, the worker's operations and the resumption of stalled ones
(workers/operations.py), and the CLI, which reads them from GET /api/v1/states.

Adding an operation (a resize, an idle stop):

1. a row in OPERATIONS: its name, the states a request takes it in (`requested_in`), the
   working states it carries the cluster through (`through`) and where it ends (`ends_in`);
2. a row in STATES for each new working state (with its `to` moves and, for a state with a
   `<state>_at` column, a migration for that field and a State choice);
3. its step in workers/lifecycle.py, bound to its name in workers/operations.OPERATIONS (the
   task, retries and lock wait), and its request in services.py, which calls
   transition(cluster, requested_in(name), first working state).

apps/clusters/tests/test_states.py checks that the two tables agree with each other.
"""

from dataclasses import dataclass
from enum import StrEnum

from django.db import models


class State(models.TextChoices):
    QUEUED = "queued"
    PLACING = "placing"
    CONFIGURING = "configuring"
    RUNNING = "running"
    RESIZING = "resizing"
    DEGRADED = "degraded"
    STOPPING = "stopping"
    STOPPED = "stopped"
    DESTROYING = "destroying"
    DESTROYED = "destroyed"
    FAILED = "failed"


class Containers(StrEnum):
    """Where a cluster's containers are while it is in a state."""

    NOT_YET = "not yet"  # the launch has not created them (or not all of them)
    HELD = "held"  # each instance has one (running or stopped); its log loads at once
    GONE = "gone"  # removed, or being removed


@dataclass(frozen=True)
class StateRow:
    state: State
    to: frozenset[State]  # the states it may move to; anything else is a bug in the caller
    live: bool  # counts against its owner's quota; not over
    leased: bool  # its lease runs: it expires and may be extended
    moving: bool  # it moves on by itself (the queue or a worker): pages poll for news
    watched: bool  # its containers should run and no task is at work: the reconciler checks
    containers: Containers
    logs: bool  # its containers may be writing log lines (the CLI follows them)
    resources: bool  # holds cores, memory, disks and addresses on its nodes
    phase: bool  # a phase of the launch's timeline (provisioning.py)
    cesga: str  # its status word in the CESGA API
    label: str  # its name for people
    meaning: str  # what it means, for people


S = State


def _row(state: State, to: set[State], **columns: object) -> StateRow:
    return StateRow(state=state, to=frozenset(to), **columns)  # type: ignore[arg-type]


STATES: dict[str, StateRow] = {
    row.state: row
    for row in (
        _row(
            S.QUEUED,
            {S.PLACING, S.FAILED, S.DESTROYED},
            live=True,
            leased=True,
            moving=True,
            watched=False,
            containers=Containers.NOT_YET,
            logs=False,
            resources=False,
            phase=True,
            cesga="registered",
            label="Queued",
            meaning="Waiting for room on the nodes, in order of arrival.",
        ),
        _row(
            S.PLACING,
            {S.CONFIGURING, S.QUEUED, S.FAILED, S.DESTROYING},
            live=True,
            leased=True,
            moving=True,
            watched=False,
            containers=Containers.NOT_YET,
            logs=True,
            resources=True,
            phase=True,
            cesga="scheduling",
            label="Placing",
            meaning="Its nodes, disks and addresses are reserved; its containers are being "
            "created.",
        ),
        _row(
            S.CONFIGURING,
            {S.RUNNING, S.DEGRADED, S.FAILED, S.DESTROYING},
            live=True,
            leased=True,
            moving=True,
            watched=False,
            containers=Containers.HELD,
            logs=True,
            resources=True,
            phase=True,
            cesga="configuring",
            label="Configuring",
            meaning="Its containers are starting and its services being set up.",
        ),
        _row(
            S.RUNNING,
            {S.RESIZING, S.DEGRADED, S.STOPPING, S.DESTROYING, S.FAILED},
            live=True,
            leased=True,
            moving=False,
            watched=True,
            containers=Containers.HELD,
            logs=True,
            resources=True,
            phase=False,
            cesga="ready",
            label="Running",
            meaning="Every instance runs; it is ready to use.",
        ),
        _row(
            S.RESIZING,
            {S.RUNNING, S.FAILED, S.DESTROYING},
            live=True,
            leased=True,
            moving=True,
            watched=False,
            containers=Containers.HELD,
            logs=True,
            resources=True,
            phase=False,
            cesga="configuring",  # CESGA has no word for it; its clients wait as for a launch
            label="Resizing",
            meaning="Instances are being added, or drained of their data and removed; it "
            "keeps serving meanwhile.",
        ),
        _row(
            S.DEGRADED,
            {S.RUNNING, S.STOPPING, S.DESTROYING, S.FAILED},
            live=True,
            leased=True,
            moving=False,
            watched=True,
            containers=Containers.HELD,
            logs=True,
            resources=True,
            phase=False,
            cesga="degraded",
            label="Degraded",
            meaning="Some of its instances are lost (a container died or a node is down); "
            "the others run.",
        ),
        _row(
            S.STOPPING,
            {S.STOPPED, S.FAILED, S.DESTROYING},
            live=True,
            leased=True,
            moving=True,
            watched=False,
            containers=Containers.HELD,
            logs=True,
            resources=True,
            phase=False,
            cesga="stopping",
            label="Stopping",
            meaning="Its containers are being stopped; its data and nodes stay.",
        ),
        _row(
            S.STOPPED,
            {S.CONFIGURING, S.DESTROYING},
            live=True,
            leased=True,
            moving=False,
            watched=False,
            containers=Containers.HELD,
            logs=False,
            resources=True,
            phase=False,
            cesga="stopped",
            label="Stopped",
            meaning="Its containers are stopped; it keeps its nodes, disks and data and can "
            "start again.",
        ),
        _row(
            S.DESTROYING,
            {S.DESTROYED, S.FAILED},
            live=True,
            leased=False,
            moving=True,
            watched=False,
            containers=Containers.GONE,
            logs=False,
            resources=True,
            phase=False,
            cesga="destroyed",  # CESGA reports a cluster gone as soon as the delete is taken
            label="Destroying",
            meaning="Its containers are being removed and what it held given back.",
        ),
        _row(
            S.DESTROYED,
            set(),
            live=False,
            leased=False,
            moving=False,
            watched=False,
            containers=Containers.GONE,
            logs=False,
            resources=False,
            phase=False,
            cesga="destroyed",
            label="Destroyed",
            meaning="Gone; its data was kept or wiped as the destroy asked.",
        ),
        _row(
            S.FAILED,
            {S.DESTROYING, S.DESTROYED},
            live=False,
            leased=False,
            moving=False,
            watched=False,
            containers=Containers.GONE,
            logs=False,
            resources=False,
            phase=False,
            cesga="failed",
            label="Failed",
            meaning="Something went wrong (the reason says what); what it held was given "
            "back and its data kept. Destroy it to wipe or reuse its data.",
        ),
    )
}


def having(column: str) -> tuple[State, ...]:
    """The states whose `column` is true, in life-cycle order."""
    return tuple(row.state for row in STATES.values() if getattr(row, column))


def with_containers(where: Containers) -> tuple[State, ...]:
    return tuple(row.state for row in STATES.values() if row.containers == where)


LIVE = having("live")
ENDED = tuple(s for s in STATES if s not in LIVE)  # nothing runs or moves any more
LEASED = having("leased")
MOVING = having("moving")
WATCHED = having("watched")
LOGS = having("logs")
PHASES = having("phase")


def sources_of(target: str) -> tuple[State, ...]:
    """The states that may move to `target`."""
    return tuple(row.state for row in STATES.values() if target in row.to)


@dataclass(frozen=True)
class Operation:
    """What moves a cluster on: a request (a user's, the system's or the admission queue's)
    takes it from one of `requested_in` to the first of `through`; the worker's operation
    then carries it through those states to `ends_in`."""

    name: str
    requested_in: tuple[State, ...]
    through: tuple[State, ...]
    ends_in: State


OPERATIONS: dict[str, Operation] = {
    op.name: op
    for op in (
        # A launch's request creates the cluster in queued; admission takes it to placing.
        Operation("launch", (), (S.QUEUED, S.PLACING, S.CONFIGURING), S.RUNNING),
        Operation("start", (S.STOPPED,), (S.CONFIGURING,), S.RUNNING),
        Operation("stop", (S.RUNNING, S.DEGRADED), (S.STOPPING,), S.STOPPED),
        Operation("resize", (S.RUNNING,), (S.RESIZING,), S.RUNNING),
        Operation("destroy", sources_of(S.DESTROYING), (S.DESTROYING,), S.DESTROYED),
    )
}


def requested_in(operation: str) -> tuple[State, ...]:
    return OPERATIONS[operation].requested_in


def worked_by() -> dict[str, str]:
    """Which operation a worker runs for a cluster in each state a worker carries it through
    (the first operation listing it: configuring is a launch's unless the cluster ran before,
    see workers/operations.resume_stalled). Queued waits for the admission queue instead."""
    found: dict[str, str] = {}
    for op in OPERATIONS.values():
        for state in op.through:
            if state != S.QUEUED:
                found.setdefault(state, op.name)
    return found


def as_json() -> dict:
    """The two tables as the API publishes them (GET /api/v1/states)."""
    return {
        "states": [
            {
                "name": str(row.state),
                "label": row.label,
                "meaning": row.meaning,
                "to": sorted(str(s) for s in row.to),
                "live": row.live,
                "leased": row.leased,
                "moving": row.moving,
                "watched": row.watched,
                "containers": str(row.containers),
                "logs": row.logs,
                "resources": row.resources,
                "phase": row.phase,
                "cesga": row.cesga,
            }
            for row in STATES.values()
        ],
        "operations": [
            {
                "name": op.name,
                "requested_in": [str(s) for s in op.requested_in],
                "through": [str(s) for s in op.through],
                "ends_in": str(op.ends_in),
            }
            for op in OPERATIONS.values()
        ],
    }
