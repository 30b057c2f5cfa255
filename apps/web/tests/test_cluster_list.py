"""My clusters: by default those not destroyed, a filter by state, 25 to a page, and page
links and polls (htmx) that keep the filter and the page."""

import re

import pytest
from django.urls import reverse

from apps.clusters.models import Cluster
from apps.clusters.tests.factories import make_version

pytestmark = pytest.mark.django_db
HTMX = {"HTTP_HX_REQUEST": "true"}
URL = reverse("web:clusters")


def clusters_in_states(owner, **counts: int) -> None:
    """counts: {"running": 30, ...}, named <state>-<n>; rows only (the list reads no more)."""
    version = make_version()
    for state, count in counts.items():
        for n in range(count):
            Cluster.objects.create(owner=owner, version=version, name=f"{state}-{n}", state=state)


def names(response) -> list[str]:
    return re.findall(r'<a href="/clusters/\d+/">([^<]+)</a>', response.content.decode())


def test_the_list_shows_clusters_not_destroyed_by_default(as_alice, alice, bob):
    clusters_in_states(alice, running=2, failed=1, destroyed=3)
    clusters_in_states(bob, running=1)
    response = as_alice.get(URL)
    assert response.status_code == 200
    assert sorted(names(response)) == ["failed-0", "running-0", "running-1"]
    html = response.content.decode()
    assert '<option value="live" selected>Not destroyed</option>' in html
    assert '<option value="destroyed">Destroyed</option>' in html
    assert 'hx-trigger="every 2s"' not in html  # nothing on the page is moving


def test_the_filter_shows_one_state_or_all(as_alice, alice):
    clusters_in_states(alice, running=1, queued=1, destroyed=2)
    assert sorted(names(as_alice.get(URL, {"state": "destroyed"}))) == [
        "destroyed-0",
        "destroyed-1",
    ]
    assert names(as_alice.get(URL, {"state": "queued"})) == ["queued-0"]
    assert len(names(as_alice.get(URL, {"state": "all"}))) == 4
    empty = as_alice.get(URL, {"state": "stopped"}).content.decode()
    assert "No clusters to show here." in empty and "?state=all" in empty


def test_an_unknown_state_is_refused_naming_it(as_alice, alice):
    clusters_in_states(alice, running=1)
    response = as_alice.get(URL, {"state": "bogus"})
    assert response.status_code == 400
    assert "there is no cluster state “bogus”" in response.content.decode()
    assert names(response) == []


def test_pages_of_25_with_links_keeping_the_filter(as_alice, alice):
    clusters_in_states(alice, running=30, destroyed=2)
    first = as_alice.get(URL)
    assert len(names(first)) == 25
    html = first.content.decode()
    assert "1\N{EN DASH}25 of 30" in html
    assert 'hx-get="/clusters/?state=live&amp;page=2"' in html
    assert 'hx-push-url="true"' in html
    second = as_alice.get(URL, {"state": "live", "page": "2"}, **HTMX)
    assert second.content.decode().lstrip().startswith('<div id="cluster-rows"')
    assert len(names(second)) == 5
    assert "26\N{EN DASH}30 of 30" in second.content.decode()
    assert set(names(first)).isdisjoint(names(second))
    # Pages past the end or not numbers fall back to a page that exists.
    assert len(names(as_alice.get(URL, {"page": "99"}))) == 5
    assert len(names(as_alice.get(URL, {"page": "x"}))) == 25
    everything = as_alice.get(URL, {"state": "all"}).content.decode()
    assert "1\N{EN DASH}25 of 32" in everything and "state=all&amp;page=2" in everything


def test_the_poll_keeps_the_filter_and_the_page(as_alice, alice):
    clusters_in_states(alice, running=25, queued=3)
    # Newest first: the queued ones are on page 1; page 2 has only running ones.
    assert "every 2s" not in as_alice.get(URL, {"page": "2"}).content.decode()
    page = as_alice.get(URL, {"state": "queued"}, **HTMX).content.decode()
    assert 'hx-get="/clusters/?state=queued&amp;page=1" hx-trigger="every 2s"' in page
    # The filter sits outside the polled rows, so a poll never resets it.
    full = as_alice.get(URL, {"state": "queued"}).content.decode()
    assert full.index('<form class="list-filter"') < full.index('<div id="cluster-rows"')
    assert full.index("</form>") < full.index('<div id="cluster-rows"')
