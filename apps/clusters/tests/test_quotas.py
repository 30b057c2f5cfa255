import pytest
from django.contrib.auth.models import Group

from apps.accounts.models import Quota
from apps.clusters.quotas import QuotaExceeded, user_usage
from apps.clusters.reservation import reserve

from .factories import make_cluster, make_network, make_node, wants

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def inventory(db):
    make_network()
    return [make_node() for _ in range(4)]


def test_it_refuses_a_launch_over_quota_naming_limit_asked_and_used(alice):
    Quota.objects.create(user=alice, max_cores=10)
    reserve(make_cluster(alice, wants(2, cores=3)).id)
    with pytest.raises(QuotaExceeded) as refused:
        make_cluster(alice, wants(2, cores=3))
    error = refused.value
    assert (error.limit, error.asked, error.used, error.maximum) == ("max_cores", 6, 6, 10)
    assert str(error) == "the quota of user alice is 10 cores: 6 in use, 6 more asked"


def test_usage_is_derived_from_active_allocations(alice):
    cluster = make_cluster(alice, wants(2, cores=3, disks=2, kind="hdd"))
    assert user_usage(alice.id)["max_cores"] == 0  # queued holds nothing yet
    reserve(cluster.id)
    used = user_usage(alice.id)
    assert (used["max_clusters"], used["max_instances"], used["max_cores"]) == (1, 2, 6)
    assert (used["max_disks"], used["max_disks_hdd"], used["max_disks_ssd"]) == (4, 4, 0)
    from .factories import destroy_now

    destroy_now(cluster.id)
    assert user_usage(alice.id)["max_disks"] == 0


def test_it_limits_disks_per_kind(alice):
    make_node(disks={"ssd": 4})
    Quota.objects.create(user=alice, max_disks_ssd=2)
    make_cluster(alice, wants(1, disks=4, kind="hdd"))
    with pytest.raises(QuotaExceeded, match="is 2 SSD disks"):
        make_cluster(alice, wants(1, disks=3, kind="ssd"))


def test_queued_clusters_count_against_the_quota_at_launch(alice):
    Quota.objects.create(user=alice, max_instances=5)
    make_cluster(alice, wants(3))  # queued: holds nothing yet, but will
    with pytest.raises(QuotaExceeded, match="user alice is 5 instances: 3 in use, 3 more asked"):
        make_cluster(alice, wants(3))
    assert user_usage(alice.id)["max_instances"] == 0  # what is held is still nothing
    assert user_usage(alice.id, committed=True)["max_instances"] == 3


def test_the_reservation_checks_again_and_fails_the_cluster(alice):
    quota = Quota.objects.create(user=alice, max_instances=4)
    first = make_cluster(alice, wants(2))
    second = make_cluster(alice, wants(2))
    Quota.objects.filter(id=quota.id).update(max_instances=3)  # an admin lowered it meanwhile
    reserve(first.id)
    outcome = reserve(second.id)
    assert outcome.cause == "quota"
    assert outcome.quota.limit == "max_instances"
    second.refresh_from_db()
    assert second.state == "failed"
    assert "is 3 instances" in second.reason


def test_a_group_quota_caps_its_members_together(alice, bob):
    team = Group.objects.create(name="team")
    team.user_set.add(alice, bob)
    Quota.objects.create(group=team, max_cores=8)
    reserve(make_cluster(alice, wants(1, cores=5)).id)
    with pytest.raises(QuotaExceeded) as refused:
        make_cluster(bob, wants(1, cores=4))
    assert refused.value.scope == "group team"
    assert refused.value.used == 5


def test_users_without_a_quota_get_the_default(alice, settings):
    settings.SCHEDULER_DEFAULT_QUOTA = {"max_clusters": 1}
    make_cluster(alice, wants(1))
    with pytest.raises(QuotaExceeded, match="is 1 cluster:"):
        make_cluster(alice, wants(1))


def test_bob_usage_is_not_alices(alice, bob):
    reserve(make_cluster(alice, wants(1, cores=4)).id)
    assert user_usage(bob.id)["max_cores"] == 0
