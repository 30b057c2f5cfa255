"""What a launch request would mean before it is made: quota usage against the request, and
whether free capacity takes it now or it waits in the queue.

Advisory only (no locks): the reservation checks again, under locks, when it really places
the cluster. The web launch form shows this as the user types; the quota page shows the
usage part with an empty request."""

from dataclasses import dataclass, field
from itertools import count

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser

from apps.accounts.models import LIMIT_FIELDS, Quota

from . import placement
from .models import Cluster
from .quotas import LIMIT_WORDS, Demand, default_limits, usage_of, user_usage

NO_DEMAND = Demand(instances=0, cores=0, memory_mb=0, disks_by_kind={})


@dataclass(frozen=True)
class LimitUsage:
    """One limit of one scope: what is used, what the request asks, and by how much it is over."""

    limit: str
    used: int
    asked: int
    maximum: int | None

    @property
    def label(self) -> str:
        """What the limit counts, in words ("HDD disks", not "disks hdd")."""
        if self.limit == "max_memory_mb":
            return "memory (MB)"
        return LIMIT_WORDS.get(self.limit, ("", self.limit))[1]

    @property
    def after(self) -> int:
        return self.used + self.asked

    @property
    def over_by(self) -> int:
        return 0 if self.maximum is None else max(0, self.after - self.maximum)

    @property
    def percent(self) -> int:
        """Share of the limit used (capped at 100), for bars."""
        if self.maximum is None:
            return 0
        if self.maximum == 0:
            return 100 if self.after else 0
        return min(100, round(100 * self.after / self.maximum))


@dataclass(frozen=True)
class ScopeUsage:
    name: str
    limits: list[LimitUsage]

    @property
    def over(self) -> list[LimitUsage]:
        return [item for item in self.limits if item.over_by]


@dataclass(frozen=True)
class CapacityFit:
    fits_now: bool
    queued_ahead: int
    message: str


@dataclass(frozen=True)
class LaunchPreview:
    scopes: list[ScopeUsage]
    capacity: CapacityFit | None = None
    demand: Demand = field(default=NO_DEMAND)

    @property
    def within_quota(self) -> bool:
        return not any(scope.over for scope in self.scopes)


def quota_usage(user: AbstractBaseUser, demand: Demand = NO_DEMAND) -> list[ScopeUsage]:
    """Usage of the user's own limits (their quota or the defaults), then of each group of
    theirs that has a quota, next to what `demand` asks."""
    asked = demand.as_limits(clusters=1 if demand.instances else 0)
    own = Quota.objects.filter(user=user.pk).first()
    limits = own.limits() if own else default_limits()
    # Counted as the launch counts it: queued clusters take their share already.
    used = user_usage(user.pk, committed=True)
    scopes = [_scope(f"user {user.get_username()}", limits, used, asked)]
    for quota in Quota.objects.filter(group__user=user.pk).select_related("group").order_by("id"):
        used = usage_of(quota, committed=True)
        scopes.append(_scope(f"group {quota.group}", quota.limits(), used, asked))
    return scopes


def _scope(name: str, limits: dict, used: dict, asked: dict) -> ScopeUsage:
    # Only limits that are set, plus anything the request touches, keep the view short.
    rows = [
        LimitUsage(limit, used[limit], asked[limit], limits.get(limit))
        for limit in LIMIT_FIELDS
        if limits.get(limit) is not None or asked[limit]
    ]
    return ScopeUsage(name, rows)


@dataclass(frozen=True)
class _Want:
    id: int
    cores: int
    memory_mb: int
    disks: int
    disk_kind: str


def capacity_fit(instances: list) -> CapacityFit:
    """Whether today's free nodes and disks could take these instances (each instance needs
    one node with its cores, memory and whole free disks), and how many clusters queue ahead."""
    ids = count(1)
    wants = [_Want(next(ids), i.cores, i.memory_mb, i.disks, i.disk_kind) for i in instances]
    ahead = Cluster.objects.filter(state=Cluster.State.QUEUED).count()
    if not wants:
        return CapacityFit(True, ahead, "nothing to place")
    window = max(settings.SCHEDULER_CANDIDATE_WINDOW, 4 * len(wants))
    plan = placement.assign(wants, placement.candidates(wants, window=window))
    if plan is None:
        return CapacityFit(False, ahead, "not enough free capacity now: it will wait queued")
    if ahead:
        return CapacityFit(True, ahead, f"fits free capacity, but {ahead} queued before it")
    return CapacityFit(True, 0, "fits the free capacity now")


def preview_launch(user: AbstractBaseUser, instances: list) -> LaunchPreview:
    demand = Demand.of(instances)
    return LaunchPreview(quota_usage(user, demand), capacity_fit(instances), demand)
