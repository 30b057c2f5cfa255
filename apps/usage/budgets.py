"""Monthly budgets of quota groups: what is left, the refusal of a launch past one, and the
warning at 80 %. Usage is this month's (UTC), read as services.py reads it."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime

from django.contrib.auth import get_user_model
from django.db import IntegrityError, transaction
from django.utils import timezone

from apps.clusters.models import LIVE_STATES, Cluster
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
    """A launch by a member of a group whose monthly budget is used up (HTTP 403)."""

    def __init__(self, spent: BudgetLeft) -> None:
        limit = f"{spent.figure.removesuffix('_h')}_hours_per_month"
        super().__init__(limit, 0, round(spent.used), spent.maximum, f"group {spent.group}")
        self.args = (
            f"the budget of group {spent.group} is {spent.maximum} {WORDS[spent.figure]} a "
            f"month and {spent.used:.1f} are used this month: no launch until the next month "
            "or a larger budget",
        )


def month_start(today: date) -> date:
    return today.replace(day=1)


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
