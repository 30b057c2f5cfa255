"""Cluster life cycle: launch, stop, start, destroy, leases. Reservation, quotas and the
admission queue live in their own modules; this is the entry point views and workers call.

Views and the API call the `request_*` functions: they check and move the state, then hand the
node work to a worker (apps.tasks.bus.dispatch). The workers call `finish_destroy` once the
containers are gone."""

import math
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from apps.audit.services import Action, Actor, record
from apps.catalog.options import ClusterSpec
from apps.catalog.revisions import current_revision
from apps.tasks import bus

from . import autoscale, idle, placement, preview
from .admission import admit_queued
from .models import Cluster, Instance
from .names import NameTaken, create_named
from .perimeter import parse_sources
from .quotas import Demand, QuotaExceeded, check_quota
from .reservation import Rejection, Reservation, release, reserve
from .states import LEASED, requested_in
from .transitions import TransitionError, record_event, transition

__all__ = [
    "InstanceWant",
    "LeaseError",
    "NameTaken",
    "NeverFits",
    "QuotaExceeded",
    "Rejection",
    "Reservation",
    "ReuseError",
    "StateConflict",
    "TransitionError",
    "admit_queued",
    "create_cluster",
    "expire_leases",
    "extend_lease",
    "finish_destroy",
    "launch",
    "release",
    "request_destroy",
    "request_notebook",
    "request_resize",
    "request_start",
    "request_stop",
    "request_vertical_resize",
    "reserve",
    "transition",
]

S = Cluster.State


@dataclass(frozen=True)
class InstanceWant:
    """One instance to create; the catalog's InstanceSpec has the same fields."""

    role: str
    index: int
    cores: int
    memory_mb: int
    disks: int
    disk_kind: str = "hdd"
    image: str = ""


class LeaseError(ValueError):
    """A lease that is not allowed (too long, in the past, on a finished cluster)."""


class ReuseError(ValueError):
    """The cluster whose data should be reused cannot be."""


class NeverFits(ValueError):
    """The cluster could not run on the pool as it is, even with every other cluster gone:
    refused at launch rather than queued for ever in front of others."""


class StateConflict(TransitionError):
    """The cluster's current state does not allow the action asked for (HTTP 409)."""


def _lease_end(hours: float | None, start: datetime) -> datetime | None:
    if hours is None:
        return None
    if hours <= 0:
        raise LeaseError(f"a lease must be positive; got {hours} hours")
    cap = settings.SCHEDULER_MAX_LEASE_HOURS
    if cap and hours > cap:
        raise LeaseError(f"a lease may be at most {cap} hours; asked {hours}")
    return start + timedelta(hours=hours)


def add_instances(cluster: Cluster, wanted: Iterable) -> None:
    """The instance rows of a launch or of a resize's additions (unplaced, named role-index)."""
    Instance.objects.bulk_create(
        Instance(
            cluster=cluster,
            role=i.role,
            index=i.index,
            cores=i.cores,
            memory_mb=i.memory_mb,
            disks=i.disks,
            disk_kind=i.disk_kind,
            image=i.image,
            hostname=f"{i.role}-{i.index}"[:63],
        )
        for i in wanted
    )


@transaction.atomic
def create_cluster(
    owner,
    version,
    name: str,
    instances: list,
    options: dict | None = None,
    lease_hours: float | None = None,
    reuse_data_of: Cluster | None = None,
    *,
    actor: Actor = None,
    allowed_sources: list[str] | None = None,
) -> Cluster:
    """A queued cluster with its instance rows. Raises QuotaExceeded (HTTP 403) when even
    the current usage leaves no room; the reservation checks again under locks. `actor` is
    who asked (for the audit log); a launch is on the owner's behalf unless named otherwise.
    `allowed_sources`: the owner's allow-list, as perimeter.parse_sources normalised it."""
    check_quota(owner.id, Demand.of(instances))
    if reuse_data_of is not None and reuse_data_of.owner_id != owner.id:
        raise ReuseError(f"cluster {reuse_data_of.name} belongs to someone else")
    revision = current_revision(version)  # the definition it launches with, for good
    cluster = create_named(
        owner.id,
        name,
        lambda free: Cluster.objects.create(
            owner=owner,
            version=version,
            revision=revision,
            name=free,
            options=options or {},
            expires_at=_lease_end(lease_hours, timezone.now()),
            reuse_data_of=reuse_data_of,
            allowed_sources=allowed_sources or [],
        ),
    )
    add_instances(cluster, instances)
    record_event(cluster.id, "queued")
    autoscale.apply_group_default(cluster)  # the owner's groups' default policy, if any
    record(
        Action.CLUSTER_LAUNCH,
        actor or owner,
        cluster,
        object_repr=_describe(cluster, owner),
        version=str(version),
        instances=len(instances),
        options=options or {},
        lease_hours=lease_hours,
        reuse_data_of=reuse_data_of.id if reuse_data_of else None,
        allowed_sources=allowed_sources or [],
    )
    bus.dispatch(bus.LAUNCH, cluster.id)
    return cluster


def launch(
    owner,
    version,
    name: str,
    options: dict,
    lease_hours: float | None = None,
    reuse_data_of: Cluster | None = None,
    *,
    actor: Actor = None,
    spec: ClusterSpec | None = None,
    idle_minutes: int | None = None,
    allowed_sources: Iterable[str] = (),
) -> Cluster:
    """Resolve the catalog options (OptionsError names bad ones) and queue the cluster.
    `spec`: what apps.clusters.launch_requests.parse_launch resolved from these options already;
    `idle_minutes`: its idle limit (checked there too), if any; `allowed_sources`: who else
    reaches its ports (perimeter.py; SourceError names a bad entry)."""
    from apps.catalog.images import require_images  # the catalog owns option and image rules
    from apps.catalog.options import resolve

    spec = spec or resolve(version, options)
    require_images(version)  # ImageUnavailable: a cluster that could never start is refused
    # A reuse goes back to the nodes holding its data, or fails there.
    if reuse_data_of is None and (problem := placement.never_fits(spec.instances)):
        raise NeverFits(f"this cluster could never run on this pool: {problem}")
    cluster = create_cluster(
        owner,
        version,
        name,
        spec.instances,
        options,
        lease_hours,
        reuse_data_of,
        actor=actor,
        allowed_sources=parse_sources(allowed_sources),
    )
    if idle_minutes is not None:
        idle.set_limit(cluster.id, idle_minutes)
        cluster.idle_limit_minutes = idle_minutes
    return cluster


def _describe(cluster: Cluster, owner=None) -> str:
    """How the audit log names a cluster: its name and owner (the state would go stale)."""
    owner = owner or cluster.owner
    return f"{cluster.name} of {owner.get_username()}"


def _audit(action: str, cluster_id: int, actor: Actor, **detail: Any) -> None:
    """An audit row for an action on the cluster, in the caller's transaction."""
    cluster = Cluster.objects.select_related("owner").get(id=cluster_id)
    record(action, actor, cluster, object_repr=_describe(cluster), **detail)


@transaction.atomic
def request_destroy(
    cluster_id: int, keep_data: bool = True, *, actor: Actor = None, reason: str = ""
) -> str:
    """Destroy a cluster, keeping its disks' data for a later reuse unless asked not to. A
    queued cluster is cancelled at once; otherwise a worker removes the containers (and wipes
    the data if asked) and then calls finish_destroy. Asking again while it is being
    destroyed is harmless and audits nothing: only the request that moved the state is
    recorded (`actor` None: the system, e.g. `reason` "lease expired"). Returns the state
    the cluster is now in."""
    why = {"reason": reason} if reason else {}
    if transition(cluster_id, S.QUEUED, S.DESTROYED, "cancelled before placement"):
        _audit(
            Action.CLUSTER_DESTROY, cluster_id, actor, keep_data=keep_data, cancelled=True, **why
        )
        return S.DESTROYED
    how = "data kept" if keep_data else "data will be wiped"
    if not transition(cluster_id, requested_in("destroy"), S.DESTROYING, how):
        state = _state(cluster_id)
        if state in (S.DESTROYING, S.DESTROYED):
            return state
        raise StateConflict(f"cluster {cluster_id} is {state}; it cannot be destroyed now")
    Cluster.objects.filter(id=cluster_id).update(wipe_data=not keep_data)
    _audit(Action.CLUSTER_DESTROY, cluster_id, actor, keep_data=keep_data, **why)
    bus.dispatch(bus.DESTROY, cluster_id)
    return S.DESTROYING


def finish_destroy(cluster_id: int, keep_data: bool | None = None) -> bool:
    """Release everything the cluster held and mark it destroyed (its containers are gone);
    the data is kept unless the destroy asked for a wipe."""
    if keep_data is None:
        keep_data = not Cluster.objects.filter(id=cluster_id, wipe_data=True).exists()
    release(cluster_id, keep_data=keep_data)
    return transition(cluster_id, S.DESTROYING, S.DESTROYED)


@transaction.atomic
def request_stop(cluster_id: int, *, actor: Actor = None, reason: str = "") -> str:
    """Stop every container; the cluster keeps its nodes, disks and addresses. Asking again
    while it stops is harmless and audits nothing. `reason` says why when it was not asked for
    by a person (an idle stop)."""
    if not transition(cluster_id, requested_in("stop"), S.STOPPING, reason):
        state = _state(cluster_id)
        if state in (S.STOPPING, S.STOPPED):
            return state
        raise StateConflict(f"cluster {cluster_id} is {state}; only running clusters stop")
    _audit(Action.CLUSTER_STOP, cluster_id, actor, **({"reason": reason} if reason else {}))
    bus.dispatch(bus.STOP, cluster_id)
    return S.STOPPING


@transaction.atomic
def request_start(cluster_id: int, *, actor: Actor = None) -> str:
    """Start a stopped cluster's containers again on the same nodes and disks. Asking again
    while it starts is harmless and audits nothing."""
    if not transition(cluster_id, requested_in("start"), S.CONFIGURING, "starting"):
        state = _state(cluster_id)
        if state in (S.CONFIGURING, S.RUNNING):
            return state
        raise StateConflict(f"cluster {cluster_id} is {state}; only stopped clusters start")
    _audit(Action.CLUSTER_START, cluster_id, actor)
    bus.dispatch(bus.START, cluster_id)
    return S.CONFIGURING


def _locked_for_resize(cluster_id: int) -> Cluster:
    """The cluster, its row locked (first in the lock order), if a resize may be asked now;
    StateConflict naming its state otherwise."""
    cluster = (
        Cluster.objects.select_for_update(of=("self",))
        .select_related("version__product", "revision")
        .get(id=cluster_id)
    )
    if cluster.state not in requested_in("resize"):
        raise StateConflict(
            f"cluster {cluster.name} is {cluster.state}; only a running cluster can be resized"
        )
    return cluster


@transaction.atomic
def request_resize(cluster_id: int, workers: object, *, actor: Actor = None) -> str:
    """Resize a running cluster to `workers` instances of its scalable role (resize.py says
    which, and refuses with ResizeRefused naming why). A grow is checked against the owner's
    quota now (QuotaExceeded) and reserved all or nothing by the worker; a shrink drains the
    leaving instances first. Returns the state the cluster is now in (resizing)."""
    from .resize import ResizeRefused, pinned_options, plan

    cluster = _locked_for_resize(cluster_id)
    resize = plan(cluster, workers)
    if resize.grows:
        check_quota(cluster.owner_id, resize.demand)
        fit = preview.capacity_fit(resize.added)
        if not fit.fits_now:
            raise ResizeRefused(f"not enough free capacity for {len(resize.added)} more now")
    how = f"to {resize.target} {resize.role}s (from {resize.current})"
    if not transition(cluster_id, requested_in("resize"), S.RESIZING, how):
        raise StateConflict(f"cluster {cluster.name} changed state; try again")
    Cluster.objects.filter(id=cluster_id).update(resize_to=resize.target)
    if (options := pinned_options(cluster)) is not None:
        Cluster.objects.filter(id=cluster_id).update(options=options)
    add_instances(cluster, resize.added)
    _audit(
        Action.CLUSTER_RESIZE,
        cluster_id,
        actor,
        role=resize.role,
        previous=resize.current,
        workers=resize.target,
    )
    bus.dispatch(bus.RESIZE, cluster_id)
    return S.RESIZING


@transaction.atomic
def request_vertical_resize(
    cluster_id: int,
    role: object,
    cores: object = None,
    memory_mb: object = None,
    *,
    actor: Actor = None,
) -> str:
    """New cores and/or memory for every instance of a role of a running cluster
    (vertical.py's rules; ResizeRefused naming why not). Lock order as a reservation's: the
    cluster, the owner and their quotas (a grow's QuotaExceeded), then the instances' nodes,
    each of which must have room where the instance is. The new figures are written now, so
    what they take is held from here on; the worker applies them (live, or a rolling
    restart) and puts the old ones back if it cannot."""
    from . import vertical
    from .resize import ResizeRefused

    cluster = _locked_for_resize(cluster_id)
    change = vertical.plan(cluster, role, cores, memory_mb)
    if change.grows:
        check_quota(cluster.owner_id, change.demand)
    if (short := vertical.shortage(change, lock=True)) is not None:
        raise ResizeRefused(short, None)
    how = f"{change.role}s to {change.cores} cores and {change.memory_mb} MB"
    if not transition(cluster_id, requested_in("resize"), S.RESIZING, how):
        raise StateConflict(f"cluster {cluster.name} changed state; try again")
    Cluster.objects.filter(id=cluster_id).update(resize_to=None, reshape=change.as_record())
    vertical.set_figures(vertical.asked_figures(change.as_record()))
    _audit(
        Action.CLUSTER_RESIZE,
        cluster_id,
        actor,
        role=change.role,
        cores=change.cores,
        memory_mb=change.memory_mb,
        previous_cores=change.changes[0].cores[0],
        previous_memory_mb=change.changes[0].memory_mb[0],
    )
    bus.dispatch(bus.RESIZE, cluster_id)
    return S.RESIZING


@transaction.atomic
def request_notebook(cluster_id: int, *, actor: Actor = None) -> str:
    """Add a notebook to a running Spark cluster launched without one: a resize growing the
    notebook role from 0 to 1 (same quota check, reservation, failure policy and events); the
    launch option is recorded once it runs (workers/resize.py), so a start recreates it.
    NotebookRefused (409) naming why; QuotaExceeded as a launch's."""
    from . import notebook

    cluster = (
        Cluster.objects.select_for_update(of=("self",))
        .select_related("version__product", "revision")
        .get(id=cluster_id)
    )
    grow = notebook.plan(cluster)
    check_quota(cluster.owner_id, grow.demand)
    if not preview.capacity_fit(grow.added).fits_now:
        raise notebook.NotebookRefused("not enough free capacity for a notebook now; try later")
    if not transition(cluster_id, requested_in("resize"), S.RESIZING, "adding a notebook"):
        raise StateConflict(f"cluster {cluster.name} changed state; try again")
    Cluster.objects.filter(id=cluster_id).update(resize_to=None)
    add_instances(cluster, grow.added)
    _audit(
        Action.CLUSTER_RESIZE, cluster_id, actor, role=grow.role, previous=0, workers=grow.target
    )
    bus.dispatch(bus.RESIZE, cluster_id)
    return S.RESIZING


def _state(cluster_id: int) -> str:
    return Cluster.objects.filter(id=cluster_id).values_list("state", flat=True).first() or "gone"


def expire_leases(now: datetime | None = None) -> list[int]:
    """Destroy (keeping data) every live cluster whose lease has ended; run periodically by
    the system, so the audit rows have no actor."""
    now = now or timezone.now()
    due = Cluster.objects.filter(state__in=LEASED, expires_at__lte=now)
    expired = []
    for cluster_id in due.values_list("id", flat=True):
        record_event(cluster_id, "lease expired")
        done = request_destroy(cluster_id, keep_data=True, actor=None, reason="lease expired")
        if done in (S.DESTROYING, S.DESTROYED):
            expired.append(cluster_id)
    return expired


def extend_lease(cluster_id: int, hours: float, *, actor: Actor = None) -> datetime:
    """Push the lease end `hours` further (from now if it already passed). A lease without an
    end has nothing to extend (doing so would give it one)."""
    if not math.isfinite(hours) or hours <= 0:
        raise LeaseError(f"an extension must be a positive number of hours; got {hours}")
    with transaction.atomic():
        cluster = Cluster.objects.select_for_update().get(id=cluster_id)
        if cluster.state not in LEASED:
            raise StateConflict(f"cluster {cluster.name} is {cluster.state}; its lease is over")
        if cluster.expires_at is None:
            raise LeaseError(f"cluster {cluster.name}'s lease has no end: nothing to extend")
        now = timezone.now()
        start = max(cluster.expires_at, now)
        end = start + timedelta(hours=hours)
        cap = settings.SCHEDULER_MAX_LEASE_HOURS
        if cap and end > now + timedelta(hours=cap):
            raise LeaseError(f"a lease may end at most {cap} hours from now")
        previous, cluster.expires_at = cluster.expires_at, end
        cluster.save(update_fields=["expires_at"])
        record_event(cluster_id, f"lease extended to {end:%Y-%m-%d %H:%M} UTC")
        _audit(
            Action.CLUSTER_EXTEND,
            cluster_id,
            actor,
            hours=hours,
            previous_end=previous,
            expires_at=end,
        )
    return end
