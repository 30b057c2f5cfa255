"""The cluster page's "Who may connect": the owner's allow-list, the site's ranges, the htmx
form that replaces the list, and the launch form's field."""

import pytest

from apps.clusters.models import Cluster, ClusterEvent

pytestmark = pytest.mark.django_db
HTMX = {"HTTP_HX_REQUEST": "true"}
SENTENCE = (
    "Your cluster's ports answer its own members, the portal and these sources; "
    "SSH (22) answers everyone with your keys."
)


def events_of(cluster: Cluster) -> list[str]:
    return list(ClusterEvent.objects.filter(cluster=cluster).values_list("message", flat=True))


def test_the_page_shows_the_list_the_site_ranges_and_what_they_mean(as_alice, mine, settings):
    settings.PERIMETER_SITE_SOURCES = ["172.20.0.0/16"]
    Cluster.objects.filter(id=mine.id).update(allowed_sources=["10.8.0.0/16"])
    page = as_alice.get(f"/clusters/{mine.id}/").content.decode()
    assert "Who may connect" in page and SENTENCE in page
    assert '<dd data-testid="allowed-sources"><code>10.8.0.0/16</code></dd>' in page
    assert '<dd data-testid="site-sources"><code>172.20.0.0/16</code></dd>' in page
    assert f'hx-post="/clusters/{mine.id}/sources"' in page


def test_the_owner_sets_the_list_with_htmx_and_gets_the_panel_back(as_alice, mine):
    answer = as_alice.post(
        f"/clusters/{mine.id}/sources", {"allowed_sources": "192.0.2.7, 10.8.1.0/16"}, **HTMX
    )
    assert answer.status_code == 200
    panel = answer.content.decode()
    assert '<div id="cluster-sources">' in panel and "<html" not in panel  # the panel alone
    assert "<code>10.8.0.0/16</code>, <code>192.0.2.7/32</code>" in panel
    assert 'value="10.8.0.0/16, 192.0.2.7/32"' in panel
    assert Cluster.objects.get(id=mine.id).allowed_sources == ["10.8.0.0/16", "192.0.2.7/32"]
    assert "allowed sources set to 10.8.0.0/16, 192.0.2.7/32 by alice" in events_of(mine)

    cleared = as_alice.post(f"/clusters/{mine.id}/sources", {"allowed_sources": " "}, **HTMX)
    assert "nobody else" in cleared.content.decode()
    assert Cluster.objects.get(id=mine.id).allowed_sources == []


def test_a_bad_entry_is_named_in_the_panel_and_changes_nothing(as_alice, mine):
    Cluster.objects.filter(id=mine.id).update(allowed_sources=["10.8.0.0/16"])
    answer = as_alice.post(
        f"/clusters/{mine.id}/sources", {"allowed_sources": "10.1.0.0/16 my-laptop"}, **HTMX
    )
    panel = answer.content.decode()
    assert answer.status_code == 200  # htmx swaps only 2xx answers in
    assert "&#x27;my-laptop&#x27; is not an IPv4 address or CIDR" in panel
    assert 'value="10.1.0.0/16 my-laptop"' in panel  # what was typed, to fix it
    assert "<code>10.8.0.0/16</code>" in panel  # the list as it still is
    assert Cluster.objects.get(id=mine.id).allowed_sources == ["10.8.0.0/16"]


def test_without_htmx_the_page_comes_back_with_a_message(as_alice, mine):
    answer = as_alice.post(f"/clusters/{mine.id}/sources", {"allowed_sources": "10.0.0.300"})
    assert answer.status_code == 302 and answer["Location"] == f"/clusters/{mine.id}/"
    page = as_alice.get(f"/clusters/{mine.id}/").content.decode()
    assert "Who may connect: &#x27;10.0.0.300&#x27; is not an IPv4 address or CIDR" in page
    as_alice.post(f"/clusters/{mine.id}/sources", {"allowed_sources": "10.0.0.3"})
    assert Cluster.objects.get(id=mine.id).allowed_sources == ["10.0.0.3/32"]


def test_another_users_cluster_is_404_and_a_get_is_refused(as_alice, mine, client, bob):
    assert as_alice.get(f"/clusters/{mine.id}/sources").status_code == 405
    client.force_login(bob)
    answer = client.post(f"/clusters/{mine.id}/sources", {"allowed_sources": "0.0.0.0/0"}, **HTMX)
    assert answer.status_code == 404
    assert Cluster.objects.get(id=mine.id).allowed_sources == []


def test_a_destroyed_cluster_shows_its_list_but_no_form(as_alice, mine):
    Cluster.objects.filter(id=mine.id).update(state=Cluster.State.DESTROYED)
    page = as_alice.get(f"/clusters/{mine.id}/").content.decode()
    assert SENTENCE in page and f'hx-post="/clusters/{mine.id}/sources"' not in page
    answer = as_alice.post(
        f"/clusters/{mine.id}/sources", {"allowed_sources": "10.0.0.0/8"}, **HTMX
    )
    assert "the cluster is destroyed: its allow-list cannot change" in answer.content.decode()
    assert Cluster.objects.get(id=mine.id).allowed_sources == []


def test_the_launch_form_takes_sources_and_names_a_bad_one(as_alice, alice, seeded):
    from apps.catalog.models import ProductVersion

    demo = ProductVersion.objects.get(product__name="demo")
    url = f"/catalog/demo/{demo.version}/launch"
    assert 'name="allowed_sources"' in as_alice.get(url).content.decode()
    refused = as_alice.post(url, {"name": "open", "size": "1", "allowed_sources": "10.0.0.0/8 x"})
    assert refused.status_code == 400
    assert "&#x27;x&#x27; is not an IPv4 address or CIDR" in refused.content.decode()
    assert not Cluster.objects.filter(owner=alice, name="open").exists()
    answer = as_alice.post(
        url, {"name": "open", "size": "1", "allowed_sources": "10.0.0.0/8,  192.0.2.7"}
    )
    assert answer.status_code == 302, answer.content.decode()[-2000:]
    stored = Cluster.objects.get(owner=alice, name="open")
    assert stored.allowed_sources == ["10.0.0.0/8", "192.0.2.7/32"]
