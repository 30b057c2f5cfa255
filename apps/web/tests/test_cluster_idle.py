"""The cluster page's idle stop: set a limit, see what last used the cluster, keep it running."""

from datetime import timedelta

import pytest
from django.utils import timezone

from apps.clusters.models import Cluster
from apps.clusters.transitions import transition

pytestmark = pytest.mark.django_db


@pytest.fixture
def running(mine) -> Cluster:
    from apps.clusters.reservation import reserve

    reserve(mine.id)
    transition(mine.id, "placing", "configuring")
    transition(mine.id, "configuring", "running")
    return Cluster.objects.get(id=mine.id)


def test_the_owner_sets_a_limit_and_sees_when_it_stops(as_alice, running):
    answer = as_alice.post(f"/clusters/{running.id}/idle", {"minutes": "45"})
    assert answer.status_code == 302
    assert Cluster.objects.get(id=running.id).idle_limit_minutes == 45
    page = as_alice.get(f"/clusters/{running.id}/").content.decode()
    assert "Stops (data kept) after 45 min unused." in page
    assert "Keep running" in page


def test_a_warned_cluster_shows_the_notice_and_keep_running_clears_it(as_alice, running):
    Cluster.objects.filter(id=running.id).update(
        idle_limit_minutes=30,
        running_at=timezone.now() - timedelta(minutes=28),
        idle_warned_at=timezone.now(),
    )
    page = as_alice.get(f"/clusters/{running.id}/").content.decode()
    assert 'data-testid="idle-notice"' in page
    as_alice.post(f"/clusters/{running.id}/idle", {"keep_running": "1"})
    page = as_alice.get(f"/clusters/{running.id}/").content.decode()
    assert 'data-testid="idle-notice"' not in page
    assert "kept running by its owner" in page


def test_a_bad_limit_is_named_and_another_users_cluster_is_404(as_alice, running, client, bob):
    as_alice.post(f"/clusters/{running.id}/idle", {"minutes": "0"})
    page = as_alice.get(f"/clusters/{running.id}/").content.decode()
    assert "Give the idle limit in minutes" in page
    client.force_login(bob)
    assert client.post(f"/clusters/{running.id}/idle", {"minutes": "5"}).status_code == 404


def test_the_launch_form_takes_an_idle_limit(as_alice, alice, seeded):
    from apps.catalog.models import ProductVersion

    demo = ProductVersion.objects.get(product__name="demo")
    form = as_alice.get(f"/catalog/demo/{demo.version}/launch").content.decode()
    assert 'name="idle_minutes"' in form
    answer = as_alice.post(
        f"/catalog/demo/{demo.version}/launch",
        {"name": "sleepy", "size": "1", "idle_minutes": "20"},
    )
    assert answer.status_code == 302, answer.content.decode()[-2000:]
    assert Cluster.objects.get(owner=alice, name="sleepy").idle_limit_minutes == 20
