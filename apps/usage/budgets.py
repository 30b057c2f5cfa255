"""Monthly budgets of quota groups: what is left, the refusal of a growth past one, and the
warning at 80 %. Usage is this month's (UTC), read as services.py reads it.

A growth (a launch, a start, a lease extended, a resize, an added notebook) is checked in the
transaction that made it, under a lock on the budgets of the owner's groups (check_growth):
what the group used this month plus what its leases commit until they end (within the month)
must stay within each budget, so two growths racing for the last of one never both pass."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta

from django.contrib.auth import get_user_model
from django.db import IntegrityError, transaction
from django.db.models import Q
from django.utils import timezone

from apps.clusters.models import LIVE_STATES, Cluster, Instance
from apps.clusters.quotas import QuotaExceeded
from apps.clusters.transitions import record_event

from .models import Budget, BudgetWarning
from .services import grand_total, usage_rows

WARN_AT = 0.8
WORDS = {"core_h": "core-hours", "disk_h": "disk-hours"}


@dataclass(frozen=True)
class BudgetLeft:
    group: str
    figure: str  # core_h or disk_h
    maximum: int
    used: float

    @property
    def left(self) -> float:
        return max(0.0, self.maximum - self.used)

    @property
    def percent(self) -> int:
        return int(100 * self.used / self.maximum) if self.maximum else 100

    def words(self) -> str:
        return (
            f"{self.group}: {self.used:.1f} of {self.maximum} {WORDS[self.figure]} this month "
            f"({self.left:.1f} left)"
        )


class BudgetExceeded(QuotaExceeded):
    """A growth by a member of a group whose monthly budget is used up, or would be by what
    the group's leases commit with the growth (HTTP 403). `growth` names it ("launch")."""

    def __init__(self, spent: BudgetLeft, committed: float = 0.0, growth: str = "launch") -> None:
        limit = f"{spent.figure.removesuffix('_h')}_hours_per_month"
        asked = round(committed)
        super().__init__(limit, asked, round(spent.used), spent.maximum, f"group {spent.group}")
        words = WORDS[spent.figure]
        budget = f"the budget of group {spent.group} is {spent.maximum} {words} a month"
        if spent.used >= spent.maximum:
            self.args = (
                f"{budget} and {spent.used:.1f} are used this month: no {growth} until the next "
                "month or a larger budget",
            )
        else:
            total = spent.used + committed
            self.args = (
                f"{budget}: {spent.used:.1f} are used this month and the group's leases, with "
                f"this {growth}, would take {committed:.1f} more before they end this month "
                f"({total:.1f} in all): shorten or end a lease, or ask for a larger budget",
            )


def month_start(today: date) -> date:
    return today.replace(day=1)


def month_end(now: datetime) -> datetime:
    """The first instant (UTC) of the month after `now`'s."""
    first = datetime(now.year, now.month, 1, tzinfo=UTC)
    return (first + timedelta(days=32)).replace(day=1)


def _used(group_id: int, now: datetime) -> dict[str, float]:
    members = get_user_model().objects.filter(groups__id=group_id)
    rows = usage_rows(
        Cluster.objects.filter(owner__in=members), month_start(now.date()), now.date(), now
    )
    total = grand_total(rows)
    return {"core_h": total["core_h"], "disk_h": total["hdd_h"] + total["ssd_h"]}


def budgets_of(budgets, now: datetime | None = None) -> list[BudgetLeft]:
    now = now or timezone.now()
    found = []
    for budget in budgets.select_related("group"):
        used = _used(budget.group_id, now)
        for figure, maximum in (
            ("core_h", budget.core_hours_per_month),
            ("disk_h", budget.disk_hours_per_month),
        ):
            if maximum is not None:
                found.append(BudgetLeft(budget.group.name, figure, maximum, used[figure]))
    return found


def budgets_for(user, now: datetime | None = None) -> list[BudgetLeft]:
    """What is left of every budget of the user's groups this month."""
    return budgets_of(Budget.objects.filter(group__user=user), now)


# States whose cores will run until the lease ends (a queued or placing cluster's too: what is
# accepted counts as if it ran, as quotas count it); a stopped cluster holds only its disks.
IDLE_CORES = frozenset({Cluster.State.STOPPING, Cluster.State.STOPPED})


def committed(group_id: int, now: datetime) -> dict[str, float]:
    """What the live clusters of the group's members will hold from `now` until their leases
    end, within this month: core-hours of the instances they hold or wait for (a queued
    cluster's, a resize's pending ones) unless stopped, disk-hours of their disks (stopped
    time included, as usage counts it). A cluster without a lease end commits nothing ahead:
    its hours count as they are used."""
    horizon = month_end(now)
    instances = Instance.objects.filter(
        Q(active=True) | Q(state=Instance.State.PENDING) | Q(cluster__state=Cluster.State.QUEUED),
        cluster__owner__groups__id=group_id,
        cluster__state__in=LIVE_STATES,
        cluster__expires_at__gt=now,
    )
    ahead = {"core_h": 0.0, "disk_h": 0.0}
    for cores, disks, state, ends in instances.values_list(
        "cores", "disks", "cluster__state", "cluster__expires_at"
    ):
        hours = (min(ends or now, horizon) - now).total_seconds() / 3600
        if state not in IDLE_CORES:
            ahead["core_h"] += cores * hours
        ahead["disk_h"] += disks * hours
    return ahead


def check_growth(owner_id: int, growth: str, now: datetime | None = None) -> None:
    """Refuse (BudgetExceeded) a growth of what the owner's groups hold when a group's budget
    is used up, or when what it used this month and what its leases commit (the growth
    included) would pass it. Call in the transaction that made the growth, after it: the lock
    on the groups' budgets makes the next growth wait and then count this one."""
    locked = (
        Budget.objects.select_for_update(no_key=True, of=("self",))
        .filter(group__user=owner_id)
        .select_related("group")
        .order_by("id")
    )
    now = now or timezone.now()
    for budget in locked:
        used = _used(budget.group_id, now)
        ahead = committed(budget.group_id, now)
        for figure, maximum in (
            ("core_h", budget.core_hours_per_month),
            ("disk_h", budget.disk_hours_per_month),
        ):
            if maximum is None:
                continue
            spent = BudgetLeft(budget.group.name, figure, maximum, used[figure])
            if spent.used >= maximum or spent.used + ahead[figure] > maximum:
                raise BudgetExceeded(spent, ahead[figure], growth)


def check_budgets(user, now: datetime | None = None) -> None:
    """Refuse (BudgetExceeded) a launch by a member of a group whose budget is used up."""
    for spent in budgets_for(user, now):
        if spent.used >= spent.maximum:
            raise BudgetExceeded(spent)


def warn_budgets(now: datetime | None = None) -> int:
    """Once a month per budget and figure, when a group passes 80 %: a warning event on every
    live cluster of its members. Returns the number of warnings given."""
    now = now or timezone.now()
    given = 0
    for budget in Budget.objects.select_related("group"):
        for spent in budgets_of(Budget.objects.filter(id=budget.id), now):
            if spent.used < WARN_AT * spent.maximum:
                continue
            try:
                with transaction.atomic():
                    BudgetWarning.objects.create(
                        budget=budget, month=month_start(now.date()), figure=spent.figure
                    )
            except IntegrityError:
                continue  # warned already this month
            live = Cluster.objects.filter(owner__groups=budget.group, state__in=LIVE_STATES)
            for cluster_id in live.values_list("id", flat=True):
                record_event(cluster_id, f"budget warning: {spent.words()}", level="warning")
            given += 1
    return given
