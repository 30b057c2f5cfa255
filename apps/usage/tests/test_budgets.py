"""Monthly budgets of quota groups: what is left, the refusal past one, the 80 % warning."""

from datetime import timedelta

import pytest
from django.contrib.auth.models import Group

from apps.clusters.models import ClusterEvent
from apps.usage.budgets import BudgetExceeded, budgets_for, check_budgets, warn_budgets
from apps.usage.models import Budget, BudgetWarning

from .test_usage import T0, live, set_times

pytestmark = pytest.mark.django_db
MONTH_START = T0.replace(day=1, hour=0)


@pytest.fixture
def team(alice):
    group = Group.objects.create(name="team")
    alice.groups.add(group)
    return group


def running_since(owner, start, cores=2):
    cluster = live(owner, cores=cores, disks=1)
    set_times(cluster, dict.fromkeys(["queued", "placing", "configuring", "running"], start))
    return cluster


def test_what_is_left_counts_this_month_only(alice, team):
    Budget.objects.create(group=team, core_hours_per_month=100, disk_hours_per_month=1000)
    running_since(alice, MONTH_START - timedelta(hours=5))  # last month's hours do not count
    now = MONTH_START + timedelta(hours=10)
    core, disk = budgets_for(alice, now)
    assert (core.figure, core.used, core.left) == ("core_h", pytest.approx(20.0), 80.0)
    assert (disk.figure, disk.used) == ("disk_h", pytest.approx(10.0))
    assert core.words() == "team: 20.0 of 100 core-hours this month (80.0 left)"


def test_a_launch_past_the_budget_is_refused_naming_it(alice, bob, team):
    Budget.objects.create(group=team, core_hours_per_month=30)
    running_since(alice, MONTH_START)
    check_budgets(alice, MONTH_START + timedelta(hours=14))  # 28 of 30: still allowed
    with pytest.raises(BudgetExceeded) as refused:
        check_budgets(alice, MONTH_START + timedelta(hours=15))
    assert str(refused.value).startswith("the budget of group team is 30 core-hours a month")
    check_budgets(bob, MONTH_START + timedelta(hours=15))  # not in the group


def test_the_80_percent_warning_goes_to_every_live_cluster_once(alice, team):
    Budget.objects.create(group=team, core_hours_per_month=100)
    cluster = running_since(alice, MONTH_START)
    assert warn_budgets(MONTH_START + timedelta(hours=39)) == 0  # 78 %
    assert warn_budgets(MONTH_START + timedelta(hours=41)) == 1  # 82 %
    assert warn_budgets(MONTH_START + timedelta(hours=45)) == 0  # told already this month
    warnings = ClusterEvent.objects.filter(cluster=cluster, level="warning")
    assert [w.message for w in warnings] == [
        "budget warning: team: 82.0 of 100 core-hours this month (18.0 left)"
    ]
    assert BudgetWarning.objects.count() == 1


def test_metrics_export_each_groups_figures_as_counters(alice, bob, team):
    from django.core.cache import cache

    from apps.exporter.collector import exposition

    running_since(alice, MONTH_START, cores=2)
    running_since(bob, MONTH_START, cores=1)
    cache.delete("metrics:usage-by-group")
    text = exposition().decode()
    lines = {
        line.split(" ")[0]: float(line.split(" ")[1])
        for line in text.splitlines()
        if line.startswith("platter_usage_core_hours_total")
    }
    # Both have run since the 1st of March 2026: 2 and 1 cores for the same hours.
    assert set(lines) == {
        'platter_usage_core_hours_total{group="team"}',
        'platter_usage_core_hours_total{group="none"}',
    }
    assert lines['platter_usage_core_hours_total{group="team"}'] == pytest.approx(
        2 * lines['platter_usage_core_hours_total{group="none"}'], rel=1e-3
    )
