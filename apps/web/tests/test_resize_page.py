"""The cluster page's resize form: shown for a running cluster with its bounds, a preview of
the difference, the request and its refusals as messages."""

import pytest

from apps.clusters.models import Cluster
from apps.clusters.tests.factories import make_network, make_node
from apps.nodes.fake import FakeNodes
from workers.tests.fake_launch import running

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def signed_in(client, alice):
    """alice signed in, the catalog loaded, three fake nodes of 4 HDDs and 4 SSDs."""
    from django.core.management import call_command

    call_command("load_catalog", verbosity=0)
    make_network()
    for _ in range(3):
        make_node(disks={"hdd": 4, "ssd": 4})
    client.force_login(alice)
    with FakeNodes():
        yield client


@pytest.fixture
def page(signed_in, alice):
    return signed_in, running(alice, "demo", size=1, mem=64)


def test_the_page_offers_a_resize_within_the_bounds_and_previews_a_grow(page):
    client, cluster = page
    html = client.get(f"/clusters/{cluster.id}/").content.decode()
    assert 'name="workers"' in html and 'min="1" max="8"' in html and 'value="1"' in html
    grow = client.get(f"/clusters/{cluster.id}/resize/preview", {"workers": 3}).content.decode()
    assert "2 more workers" in grow and "Within your quota." in grow
    shrink = client.get(f"/clusters/{cluster.id}/resize/preview", {"workers": 9}).content.decode()
    assert "role worker allows 1 to 8 instances; asked 9" in shrink


def test_the_form_asks_for_the_resize_or_says_why_not(page):
    client, cluster = page
    refused = client.post(f"/clusters/{cluster.id}/resize", {"workers": 1}, follow=True)
    assert "Cannot resize: cluster" in refused.content.decode()
    assert "already has 1 workers" in refused.content.decode()
    client.post(f"/clusters/{cluster.id}/resize", {"workers": 2})
    assert Cluster.objects.get(id=cluster.id).state == "resizing"
    html = client.get(f"/clusters/{cluster.id}/").content.decode()
    assert 'name="workers"' not in html  # no second resize while one runs


def test_others_cannot_resize_or_preview(page, bob, client):
    _client, cluster = page
    client.force_login(bob)
    assert client.post(f"/clusters/{cluster.id}/resize", {"workers": 2}).status_code == 404
    preview = client.get(f"/clusters/{cluster.id}/resize/preview", {"workers": 2})
    assert preview.status_code == 404


def test_the_page_previews_and_asks_new_cores_and_memory_for_a_role(page):
    client, cluster = page
    html = client.get(f"/clusters/{cluster.id}/").content.decode()
    assert 'id="reshape-form"' in html
    assert "workers (now 1 cores, 64 MB; 1\N{EN DASH}2 cores, 64\N{EN DASH}512 MB)" in html
    preview = f"/clusters/{cluster.id}/reshape/preview"
    live = client.get(preview, {"role": "worker", "cores": "2", "memory_mb": ""}).content.decode()
    assert "cores change live" in live and "restart" not in live.split("cores change live")[0]
    assert "Quota of user alice" in live and "has room, within your quota" in live
    rolling = client.get(preview, {"role": "worker", "memory_mb": "256"}).content.decode()
    assert "the workers restart one at a time (1 restart)" in rolling
    bad = client.get(preview, {"role": "worker", "cores": "5"}).content.decode()
    assert "may have 1 to 2 cores; asked 5" in bad
    words = client.get(preview, {"role": "worker", "cores": "two"}).content.decode()
    assert "Give cores and memory as whole numbers" in words
    asked = client.post(
        f"/clusters/{cluster.id}/reshape", {"role": "worker", "memory_mb": "256"}, follow=True
    )
    assert "Changing the workers&#x27; cores and memory" in asked.content.decode()
    assert cluster.instances.get(role="worker", active=True).memory_mb == 256
    again = client.post(f"/clusters/{cluster.id}/reshape", {"role": "worker", "cores": "2"})
    assert again.status_code == 302
    html = client.get(f"/clusters/{cluster.id}/").content.decode()
    assert "Cannot resize: cluster" in html and "is resizing" in html


def test_the_page_sets_and_takes_away_an_autoscaling_policy(signed_in, alice):
    from apps.clusters.models import ScalingPolicy

    client = signed_in
    spark = running(alice, "spark", size=1, mem=1024)
    page = f"/clusters/{spark.id}/"
    assert 'id="autoscaling-form"' in client.get(page).content.decode()
    form = {"min_workers": "1", "max_workers": "3", "cooldown_seconds": "60"}
    refused = client.post(f"/clusters/{spark.id}/autoscaling", form, follow=True)
    assert "Cannot set autoscaling: the cooldown must be at least 120 s" in (
        refused.content.decode()
    )
    form["cooldown_seconds"] = "180"
    made = client.post(f"/clusters/{spark.id}/autoscaling", form, follow=True).content
    assert "Autoscaling set" in made.decode()
    assert "Autoscaling: 1\N{EN DASH}3 workers, deciding every 180 s" in made.decode()
    assert ScalingPolicy.objects.get(cluster=spark).cooldown_seconds == 180
    client.post(f"/clusters/{spark.id}/autoscaling", {"off": "1"})
    assert not ScalingPolicy.objects.exists()
    demo = running(alice, "demo", size=1, mem=64)  # reports no pending work
    assert 'id="autoscaling-form"' not in client.get(f"/clusters/{demo.id}/").content.decode()
