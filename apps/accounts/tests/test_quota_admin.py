"""Quota admin extras: usage filters and the bulk "set limits" action."""

import pytest

from apps.accounts.models import Quota
from apps.clusters.reservation import reserve
from apps.clusters.tests.factories import make_cluster, make_network, make_node, wants

pytestmark = pytest.mark.django_db
URL = "/admin/accounts/quota/"


@pytest.fixture
def quotas(alice, bob):
    make_network()
    make_node(cores=12, disks={"hdd": 6})
    full = Quota.objects.create(user=alice, max_cores=4)
    roomy = Quota.objects.create(user=bob, max_cores=100)
    reserve(make_cluster(alice, wants(1, cores=4, disks=1)).id)
    reserve(make_cluster(bob, wants(1, cores=1, disks=1)).id)
    return full, roomy


@pytest.mark.parametrize("usage", ["over80", "at_limit"])
def test_the_usage_filters_find_quotas_near_or_at_a_limit(client, admin_user, quotas, usage):
    client.force_login(admin_user)
    page = client.get(URL, {"usage": usage}).content.decode()
    assert "quota of alice" in page
    assert "quota of bob" not in page


def test_set_limits_edits_every_selected_quota(client, admin_user, quotas):
    client.force_login(admin_user)
    ids = [q.id for q in quotas]
    ask = client.post(URL, {"action": "set_limits", "_selected_action": ids})
    assert ask.status_code == 200
    assert "Make unlimited" in ask.content.decode()
    client.post(
        URL,
        {
            "action": "set_limits",
            "_selected_action": ids,
            "apply": "1",
            "max_disks": "7",
            "clear": ["max_cores"],
        },
    )
    for quota in Quota.objects.filter(id__in=ids):
        assert quota.max_disks == 7
        assert quota.max_cores is None
