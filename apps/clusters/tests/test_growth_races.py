"""A grow of a running cluster (a resize, an added notebook) and a launch want the last of a
quota at the same time: each request runs on its own database connection, started together,
and at most one is accepted. What is accepted counts at once (a resize's instances before the
worker reserves them), so whatever was accepted can all run together."""

import pytest
from django.core.management import call_command

from apps.accounts.models import Quota
from apps.catalog.models import ProductVersion
from apps.catalog.options import resolve
from apps.clusters import services
from apps.clusters.models import Cluster
from apps.clusters.quotas import QuotaExceeded, user_usage
from apps.clusters.reservation import Reservation, reserve, reserve_added

from .factories import make_cluster, make_network, make_node, wants
from .parallel import run_together

pytestmark = pytest.mark.django_db(transaction=True)
S = Cluster.State


@pytest.fixture(autouse=True)
def pool(transactional_db):
    call_command("load_catalog", verbosity=0)
    make_network()
    return [make_node(disks={"hdd": 4, "ssd": 4}) for _ in range(3)]


def running(owner, product: str, **options) -> Cluster:
    """A cluster of the catalog's `product`, reserved and marked running (no containers: the
    requests below read only the records)."""
    version = ProductVersion.objects.filter(product__name=product).order_by("id").first()
    assert version is not None, f"the catalog has {product}"
    spec = resolve(version, options)
    name = f"{product}-{Cluster.objects.count()}"
    cluster = services.create_cluster(owner, version, name, spec.instances, options)
    assert isinstance(reserve(cluster.id), Reservation)
    for before, after in ((S.PLACING, S.CONFIGURING), (S.CONFIGURING, S.RUNNING)):
        assert services.transition(cluster.id, before, after)
    return cluster


def room_for_one_more(owner) -> None:
    """The owner's quota: what they hold now and one instance more."""
    held = user_usage(owner.id)["max_instances"]
    Quota.objects.create(user=owner, max_instances=held + 1)


def grow(cluster: Cluster, how: str) -> str:
    if how == "resize":
        return services.request_resize(cluster.id, 2)
    return services.request_notebook(cluster.id)


def running_for(owner, how: str) -> Cluster:
    if how == "resize":
        return running(owner, "demo", size=1, mem=64)
    return running(owner, "spark", size=1, mem=1024)


def assert_quota_holds(owner) -> None:
    limit = Quota.objects.get(user=owner).max_instances
    assert limit is not None
    assert user_usage(owner.id, committed=True)["max_instances"] <= limit


@pytest.mark.parametrize("how", ["resize", "notebook"])
def test_it_refuses_a_launch_after_a_grow_took_the_last_of_the_quota(alice, how):
    cluster = running_for(alice, how)
    room_for_one_more(alice)
    assert grow(cluster, how) == S.RESIZING
    with pytest.raises(QuotaExceeded) as refused:
        make_cluster(alice, wants(1))
    assert str(refused.value).startswith("the quota of user alice is")
    assert "instances" in str(refused.value)
    assert_quota_holds(alice)


@pytest.mark.parametrize("how", ["resize", "notebook"])
def test_it_refuses_a_grow_after_a_launch_took_the_last_of_the_quota(alice, how):
    cluster = running_for(alice, how)
    room_for_one_more(alice)
    make_cluster(alice, wants(1))
    with pytest.raises(QuotaExceeded, match="instances"):
        grow(cluster, how)
    cluster.refresh_from_db()
    assert cluster.state == S.RUNNING
    assert_quota_holds(alice)


@pytest.mark.parametrize("how", ["resize", "notebook"])
def test_a_grow_racing_a_launch_for_the_last_of_the_quota_lets_one_through(alice, how):
    cluster = running_for(alice, how)
    room_for_one_more(alice)
    launched, grown = run_together(
        [lambda: make_cluster(alice, wants(1)), lambda: grow(cluster, how)], connected=True
    )
    outcomes = [launched, grown]
    refused = [o for o in outcomes if isinstance(o, QuotaExceeded)]
    assert [o for o in outcomes if isinstance(o, Exception) and o not in refused] == []
    assert len(refused) == 1  # either alone fits: exactly one of the two is accepted
    assert_quota_holds(alice)
    # What was accepted is reserved as accepted: the worker's reservation finds room for it.
    if isinstance(launched, Cluster):
        assert isinstance(reserve(launched.id), Reservation)
    else:
        added = list(cluster.instances.filter(active=False, state="pending"))
        assert len(added) == 1
        assert isinstance(reserve_added(cluster.id, [i.id for i in added]), Reservation)
    limit = Quota.objects.get(user=alice).max_instances
    assert user_usage(alice.id)["max_instances"] == limit


def test_the_reservation_of_a_grow_counts_what_the_cluster_holds_already(alice):
    # An admin lowers the quota after the resize was accepted: when the worker reserves the
    # added instances, the cluster's own instances count with them (they stay held).
    cluster = running(alice, "demo", size=1, mem=64)
    held = user_usage(alice.id)["max_instances"]
    assert services.request_resize(cluster.id, 3) == S.RESIZING
    Quota.objects.create(user=alice, max_instances=held + 1)
    added = [i.id for i in cluster.instances.filter(active=False, state="pending")]
    outcome = reserve_added(cluster.id, added)
    assert not isinstance(outcome, Reservation)
    assert outcome.cause == "quota"
    assert f"the quota of user alice is {held + 1} instances: {held} in use, 2 more asked" in (
        outcome.message
    )
    assert user_usage(alice.id)["max_instances"] == held
