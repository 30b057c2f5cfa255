"""Every growth (a start, a lease extended, a resize, an added notebook) is checked against the
owner's group budget under a lock, as a launch is: refused naming the budget when what the group
used this month and what its leases commit until they end would pass it, with nothing changed;
and two growths racing for the last of a budget, each on its own connection, never both pass."""

import math
import threading
import time
from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.core.management import call_command
from django.db import transaction
from django.utils import timezone

from apps.audit.models import AuditEvent
from apps.clusters.models import Cluster, Instance, ResourceChange
from apps.clusters.tests.factories import make_node
from apps.clusters.tests.parallel import run_together
from apps.clusters.tests.test_growth_races import running
from apps.clusters.transitions import transition
from apps.usage import growth
from apps.usage.budgets import BudgetExceeded, budgets_for, committed, month_end
from apps.usage.models import Budget

pytestmark = pytest.mark.django_db(transaction=True)
S = Cluster.State


@pytest.fixture(autouse=True)
def pool(transactional_db):
    call_command("load_catalog", verbosity=0)
    return [make_node(disks={"hdd": 4, "ssd": 4}) for _ in range(3)]


@pytest.fixture
def team(alice, bob):
    group = Group.objects.create(name="team")
    group.user_set.add(alice, bob)
    return group


@pytest.fixture
def hours():
    """Whole hours of the leases below: they end well within this month, so every hour of
    them counts against this month's budget."""
    now = timezone.now()
    left = (month_end(now) - now).total_seconds() / 3600
    whole = min(10, math.floor((left - 1) / 2))
    if whole < 4:
        pytest.skip("too near the month's end for leases of whole hours within it")
    return whole


def leased(cluster: Cluster, hours: int) -> Cluster:
    Cluster.objects.filter(id=cluster.id).update(expires_at=timezone.now() + timedelta(hours=hours))
    cluster.refresh_from_db()
    return cluster


def stopped(cluster: Cluster) -> Cluster:
    assert transition(cluster.id, S.RUNNING, S.STOPPING)
    assert transition(cluster.id, S.STOPPING, S.STOPPED)
    return cluster


def cores(cluster: Cluster) -> int:
    return sum(i.cores for i in cluster.instances.filter(active=True))


def core_budget(team, room: int) -> int:
    """Set the group's budget to what its leases commit now plus `room` core-hours (what was
    used already, seconds of a few cores, stays under one): a growth costing `room` + 1 or
    more is past it, one costing `room` - 1 or less fits. Returns the budget."""
    ahead = committed(team.id, timezone.now())["core_h"]
    maximum = math.ceil(ahead) + room
    Budget.objects.update_or_create(group=team, defaults={"core_hours_per_month": maximum})
    return maximum


def refused_naming(refused: pytest.ExceptionInfo, maximum: int, growth_word: str) -> None:
    message = str(refused.value)
    assert message.startswith(f"the budget of group team is {maximum} core-hours a month: ")
    assert f"with this {growth_word}, would take" in message
    assert refused.value.scope == "group team"


def test_a_start_past_the_budget_is_refused_naming_it_and_nothing_starts(alice, team, hours):
    cluster = stopped(leased(running(alice, "demo", size=1, mem=64), hours))
    cost = cores(cluster) * hours  # its cores from now to its lease's end
    maximum = core_budget(team, cost - 1)
    with pytest.raises(BudgetExceeded) as refused:
        growth.request_start(cluster.id, actor=alice)
    refused_naming(refused, maximum, "start")
    cluster.refresh_from_db()
    assert cluster.state == S.STOPPED
    assert not AuditEvent.objects.filter(action="cluster.start").exists()

    core_budget(team, cost + 1)
    assert growth.request_start(cluster.id, actor=alice) == S.CONFIGURING


def test_an_extension_past_the_budget_is_refused_and_the_lease_stays(alice, team, hours):
    cluster = leased(running(alice, "demo", size=1, mem=64), hours)
    cost = cores(cluster) * hours  # extended by as long again
    maximum = core_budget(team, cost - 1)
    with pytest.raises(BudgetExceeded) as refused:
        growth.extend_lease(cluster.id, hours, actor=alice)
    refused_naming(refused, maximum, "extension")
    before = cluster.expires_at
    cluster.refresh_from_db()
    assert cluster.expires_at == before
    assert not AuditEvent.objects.filter(action="cluster.extend").exists()

    core_budget(team, cost + 1)
    assert growth.extend_lease(cluster.id, hours, actor=alice) == before + timedelta(hours=hours)


@pytest.mark.parametrize(
    ("product", "options", "how", "role"),
    [
        ("demo", {"size": 1, "mem": 64}, "resize", "worker"),
        ("spark", {"size": 1, "mem": 1024}, "notebook", "notebook"),
    ],
)
def test_a_grow_past_the_budget_is_refused_and_adds_nothing(
    alice, team, hours, product, options, how, role
):
    cluster = leased(running(alice, product, **options), hours)
    grow = {
        "resize": lambda: growth.request_resize(cluster.id, 2, actor=alice),
        "notebook": lambda: growth.request_notebook(cluster.id, actor=alice),
    }[how]
    maximum = core_budget(team, 0)  # its leases fit; any hour more does not
    with pytest.raises(BudgetExceeded) as refused:
        grow()
    refused_naming(refused, maximum, how)
    cluster.refresh_from_db()
    assert cluster.state == S.RUNNING
    assert not cluster.instances.filter(role=role, state=Instance.State.PENDING).exists()
    assert not AuditEvent.objects.filter(action="cluster.resize").exists()

    core_budget(team, 2 * hours + 1)  # room for the new instance (1 or 2 cores) to its end
    assert grow() == S.RESIZING
    assert cluster.instances.filter(role=role, state=Instance.State.PENDING).count() == 1


def test_a_shrink_is_let_through_past_the_budget(alice, team, hours):
    cluster = leased(running(alice, "demo", size=2, mem=64), hours)
    Budget.objects.create(group=team, core_hours_per_month=1)  # passed by its leases
    assert growth.request_resize(cluster.id, 1, actor=alice) == S.RESIZING


def test_a_launch_past_the_budget_by_its_lease_is_refused(alice, team, hours):
    from apps.catalog.models import ProductVersion

    demo = ProductVersion.objects.filter(product__name="demo").first()
    options = {"size": 1, "mem": 64}
    maximum = core_budget(team, 2 * hours - 1)  # two cores: the master and one worker
    with pytest.raises(BudgetExceeded) as refused:
        growth.launch(alice, demo, "wide", options, lease_hours=hours, actor=alice)
    refused_naming(refused, maximum, "launch")
    assert not Cluster.objects.filter(name="wide").exists()
    # Without a lease end nothing is committed ahead: refused only once the budget is used up.
    assert growth.launch(alice, demo, "open", options, actor=alice).state == S.QUEUED


def test_growths_racing_for_the_last_of_a_budget_let_one_through(alice, bob, team, hours):
    # Three members start a stopped cluster each and a fourth grows a running one by a
    # worker, all at once, each on its own connection: the group's budget has room for any
    # one of them, never for two.
    members = [alice, bob] + [
        get_user_model().objects.create_user(name, f"{name}@example.org", "pw-12345")
        for name in ("carol", "dave")
    ]
    team.user_set.add(*members[2:])
    resting = [stopped(leased(running(m, "demo", size=1, mem=64), hours)) for m in members[:3]]
    busy = leased(running(members[3], "demo", size=1, mem=64), hours)
    start_cost = cores(resting[0]) * hours
    grow_cost = busy.instances.get(role="worker").cores * hours
    core_budget(team, max(start_cost, grow_cost) + min(start_cost, grow_cost) // 2)
    results = run_together(
        [lambda c=c: growth.request_start(c.id, actor=c.owner) for c in resting]
        + [lambda: growth.request_resize(busy.id, 2, actor=members[3])],
        connected=True,
    )
    through = [r for r in results if not isinstance(r, BudgetExceeded)]
    assert len(through) == 1, results
    assert through[0] in (S.CONFIGURING, S.RESIZING)
    spent = budgets_for(alice)[0]
    ahead = committed(team.id, timezone.now())["core_h"]
    assert spent.used + ahead <= spent.maximum  # what was let through fits


def test_a_growth_waits_for_one_not_yet_committed_and_then_counts_it(alice, bob, team, hours):
    # alice's start holds its transaction open a moment; bob's, asked meanwhile, must wait for
    # it (the budget's lock) and then count it, not read the group as it was before it.
    first = stopped(leased(running(alice, "demo", size=1, mem=64), hours))
    second = stopped(leased(running(bob, "demo", size=1, mem=64), hours))
    cost = cores(first) * hours
    core_budget(team, cost + cost // 2)
    asked = threading.Event()

    def first_start():
        with transaction.atomic():
            state = growth.request_start(first.id, actor=alice)
            asked.set()
            time.sleep(0.5)
        return state

    def second_start():
        assert asked.wait(timeout=30)
        return growth.request_start(second.id, actor=bob)

    started, refused = run_together([first_start, second_start], connected=True)
    assert started == S.CONFIGURING
    assert isinstance(refused, BudgetExceeded), refused
    second.refresh_from_db()
    assert second.state == S.STOPPED


def test_more_cores_past_the_budget_are_refused_and_less_memory_is_let_through(alice, team, hours):
    cluster = leased(running(alice, "demo", size=1, mem=128), hours)
    maximum = core_budget(team, 0)
    with pytest.raises(BudgetExceeded) as refused:
        growth.request_vertical_resize(cluster.id, "worker", cores=2, actor=alice)
    refused_naming(refused, maximum, "resize")
    cluster.refresh_from_db()
    assert cluster.state == S.RUNNING and cluster.reshape is None
    assert cores(cluster) == 2 and not ResourceChange.objects.exists()
    assert growth.request_vertical_resize(cluster.id, "worker", memory_mb=64, actor=alice) == (
        S.RESIZING
    )
