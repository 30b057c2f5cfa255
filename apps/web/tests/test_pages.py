"""Every page and partial of the web self-service: status codes, ownership, htmx fragments."""

import pytest
from django.urls import reverse

from apps.accounts.models import Quota
from apps.catalog.models import ProductVersion
from apps.catalog.services import load_catalog
from apps.clusters.models import Cluster
from apps.clusters.tests.factories import make_cluster, wants

pytestmark = pytest.mark.django_db
HTMX = {"HTTP_HX_REQUEST": "true"}


@pytest.fixture
def demo(db) -> ProductVersion:
    load_catalog()
    return ProductVersion.objects.get(product__name="demo")


def launch_url(version: ProductVersion, what: str = "launch") -> str:
    return reverse(f"web:{what}", args=[version.product.name, version.version])


@pytest.mark.parametrize("name", ["web:catalog", "web:clusters", "web:quota", "web:capacity"])
def test_it_sends_anonymous_visitors_to_sign_in(client, name):
    response = client.get(reverse(name))
    assert response.status_code == 302
    assert response["Location"].startswith(reverse("login"))


def test_it_shows_a_card_per_launchable_product(as_alice, demo):
    response = as_alice.get(reverse("web:catalog"))
    assert response.status_code == 200
    assert b"Demo cluster" in response.content
    assert launch_url(demo).encode() in response.content


def test_it_builds_the_launch_form_from_the_options_schema(as_alice, demo, pool):
    response = as_alice.get(launch_url(demo))
    assert response.status_code == 200
    html = response.content.decode()
    for field in ("size", "disks", "cpu", "mem", "message", "name", "disk_kind", "lease"):
        assert f'name="{field}"' in html
    assert "Number of workers" in html  # help text from the schema
    assert "Within your quota." in html  # the preview is there without JavaScript
    assert "fits the free capacity now" in html


def test_the_preview_partial_compares_the_request_with_the_quota(as_alice, alice, demo, pool):
    Quota.objects.create(user=alice, max_disks=2)
    response = as_alice.get(launch_url(demo, "preview"), {"size": 2}, **HTMX)
    assert response.status_code == 200
    html = response.content.decode()
    assert "<html" not in html
    assert "Over your quota" in html
    assert "3 disks" in html or "3 HDD disks" in html


def test_the_preview_names_bad_fields_and_when_it_would_queue(as_alice, demo, pool):
    response = as_alice.get(launch_url(demo, "preview"), {"size": 99}, **HTMX)
    assert "Fix these first" in response.content.decode()
    response = as_alice.get(launch_url(demo, "preview"), {"size": 8, "disks": 4}, **HTMX)
    assert "will wait queued" in response.content.decode()


def test_a_launch_queues_the_cluster_and_opens_its_page(as_alice, alice, demo, pool):
    response = as_alice.post(launch_url(demo), {"name": "first", "size": 2, "disk_kind": "hdd"})
    cluster = Cluster.objects.get(owner=alice, name="first")
    assert response.status_code == 302
    assert response["Location"] == reverse("web:cluster", args=[cluster.id])
    assert cluster.instances.count() == 3


def test_launch_errors_show_next_to_their_fields(as_alice, alice, demo, pool):
    response = as_alice.post(launch_url(demo), {"name": "bad name", "size": 99, "lease": "-1"})
    assert response.status_code == 400
    html = response.content.decode()
    assert 'id="id_name_error"' in html
    assert 'id="id_size_error"' in html
    assert 'id="id_lease_error"' in html
    assert not Cluster.objects.filter(owner=alice).exists()


def test_an_over_quota_launch_says_so_and_creates_nothing(as_alice, alice, demo, pool):
    Quota.objects.create(user=alice, max_instances=2)
    response = as_alice.post(launch_url(demo), {"name": "big", "size": 4, "disk_kind": "hdd"})
    assert response.status_code == 400
    assert "Over your quota: the quota of user alice is 2 instances" in response.content.decode()
    assert not Cluster.objects.filter(owner=alice).exists()


def test_my_clusters_lists_mine_only_and_polls_while_they_move(as_alice, mine, bob, pool):
    make_cluster(bob, wants(1), name="bobs")
    response = as_alice.get(reverse("web:clusters"))
    html = response.content.decode()
    assert "mine" in html and "bobs" not in html
    assert 'hx-trigger="every 2s"' in html  # queued: still moving
    partial = as_alice.get(reverse("web:clusters"), **HTMX)
    assert partial.status_code == 200
    assert partial.content.decode().lstrip().startswith('<div id="cluster-rows"')


def test_the_cluster_page_and_its_live_partial(as_alice, mine):
    response = as_alice.get(reverse("web:cluster", args=[mine.id]))
    assert response.status_code == 200
    html = response.content.decode()
    for text in ("Instances", "worker-0", "Endpoints", "Events", "Lease", "Destroy…"):
        assert text in html
    partial = as_alice.get(reverse("web:cluster", args=[mine.id]), **HTMX)
    assert partial.content.decode().lstrip().startswith('<div id="cluster-poll"')


@pytest.mark.parametrize("what", ["cluster", "destroy"])
def test_another_user_gets_404_for_my_cluster(client, bob, mine, what):
    client.force_login(bob)
    assert client.get(reverse(f"web:{what}", args=[mine.id])).status_code == 404
    assert client.get(reverse(f"web:{what}", args=[mine.id]), **HTMX).status_code == 404


@pytest.mark.parametrize("what", ["destroy", "stop", "start", "extend"])
def test_another_user_cannot_act_on_my_cluster(client, bob, mine, what):
    client.force_login(bob)
    assert client.post(reverse(f"web:{what}", args=[mine.id]), {"hours": 1}).status_code == 404
    mine.refresh_from_db()
    assert mine.state == Cluster.State.QUEUED


def test_destroy_asks_first_then_destroys(as_alice, mine):
    confirm = as_alice.get(reverse("web:destroy", args=[mine.id]))
    assert confirm.status_code == 200
    assert 'name="keep_data"' in confirm.content.decode()
    response = as_alice.post(reverse("web:destroy", args=[mine.id]), {"keep_data": "no"})
    assert response.status_code == 302
    mine.refresh_from_db()
    assert mine.state == Cluster.State.DESTROYED  # queued: cancelled at once


def test_a_refused_action_becomes_a_message(as_alice, mine):
    response = as_alice.post(reverse("web:stop", args=[mine.id]), follow=True)
    assert "only running clusters stop" in response.content.decode()


def test_the_lease_can_be_extended(as_alice, mine):
    response = as_alice.post(reverse("web:extend", args=[mine.id]), {"hours": "3"})
    assert response.status_code == 302
    mine.refresh_from_db()
    assert mine.expires_at is not None
    bad = as_alice.post(reverse("web:extend", args=[mine.id]), {"hours": "x"}, follow=True)
    assert "in hours" in bad.content.decode()


def test_the_quota_page_shows_a_bar_per_limit(as_alice, alice):
    Quota.objects.create(user=alice, max_cores=8, max_disks=10)
    response = as_alice.get(reverse("web:quota"))
    assert response.status_code == 200
    html = response.content.decode()
    assert html.count("<meter") == 2
    assert "0 of 8" in html


def test_the_capacity_page_is_for_admins_only(client, alice, admin_user, mine):
    client.force_login(alice)
    assert client.get(reverse("web:capacity")).status_code == 403
    client.force_login(admin_user)
    response = client.get(reverse("web:capacity"))
    assert response.status_code == 200
    assert response.content.decode().count('class="disk free"') >= 8


def test_the_tokens_page_has_a_copy_button(as_alice):
    response = as_alice.post(reverse("tokens:list"), {"name": "laptop"})
    assert response.status_code == 200
    assert "Copy" in response.content.decode()
