"""The cluster page's polling swaps only what changes (never the lease form, an instance's
details or the logs panel); the logs panel; the queue position."""

import re

import pytest
from django.urls import reverse

from apps.clusters.models import Cluster
from apps.clusters.reservation import reserve
from apps.clusters.services import request_destroy
from apps.clusters.tests import fake_logs
from apps.clusters.tests.factories import make_cluster, wants
from apps.clusters.transitions import record_event

pytestmark = pytest.mark.django_db
HTMX = {"HTTP_HX_REQUEST": "true"}
S = Cluster.State


def page(client, cluster: Cluster) -> str:
    response = client.get(reverse("web:cluster", args=[cluster.id]))
    assert response.status_code == 200
    return response.content.decode()


def poll(client, cluster: Cluster, state: str, since: str) -> str:
    url = reverse("web:cluster", args=[cluster.id])
    response = client.get(url, {"state": state, "since": since}, **HTMX)
    assert response.status_code == 200
    return response.content.decode()


def cursor(html: str) -> str:
    found = re.search(r'id="cluster-poll"[^>]*since=(\d+)', html)
    assert found is not None, "the page polls for events"
    return found[1]


def oob_ids(fragment: str) -> list[str]:
    return re.findall(r'id="([^"]+)" hx-swap-oob="true"', fragment)


def test_the_polled_fragment_never_holds_the_lease_form_details_or_logs(as_alice, mine):
    html = page(as_alice, mine)
    for part in ('name="hours"', 'id="cluster-logs"', '<details class="instance"'):
        assert part in html
    assert 'hx-trigger="every 1s"' in html  # queued: the page polls
    fragment = poll(as_alice, mine, "queued", cursor(html))
    for part in ('name="hours"', 'id="cluster-logs"', "log-", "<details", "<form"):
        assert part not in fragment
    assert fragment.lstrip().startswith('<div id="cluster-poll"')
    ids = oob_ids(fragment)
    assert {"cluster-state", "lease-end"} <= set(ids)
    assert all(f'id="{name}"' in html for name in ids)  # each swaps an element of the page
    assert not {"cluster-actions", "cluster-connect", "lease-extend"} & set(ids)  # no change


def test_a_state_change_swaps_actions_and_connection_but_keeps_the_lease_form(as_alice, mine):
    since = cursor(page(as_alice, mine))
    reserve(mine.id)  # queued -> placing: addresses and disks appear
    fragment = poll(as_alice, mine, "queued", since)
    assert {"cluster-actions", "cluster-connect"} <= set(oob_ids(fragment))
    assert 'name="hours"' not in fragment  # still live: the typed value stays
    for instance in mine.instances.all():
        assert f'id="instance-{instance.id}-node" hx-swap-oob="true">n' in fragment
        assert f'id="instance-{instance.id}-facts" hx-swap-oob="true"' in fragment


def test_the_lease_form_goes_only_when_the_cluster_is_no_longer_live(as_alice, mine):
    since = cursor(page(as_alice, mine))
    request_destroy(mine.id)  # queued: cancelled at once
    fragment = poll(as_alice, mine, "queued", since)
    assert "lease-extend" in oob_ids(fragment)
    assert 'name="hours"' not in fragment
    assert "hx-trigger" not in fragment  # destroyed: the poller rests


def test_events_after_the_cursor_are_appended(as_alice, mine):
    html = page(as_alice, mine)
    since = cursor(html)
    assert poll(as_alice, mine, "queued", since).count("<li") == 0
    record_event(mine.id, "something happened")
    fragment = poll(as_alice, mine, "queued", since)
    assert '<ol hx-swap-oob="beforeend:#events">' in fragment and 'id="events"' in html
    assert fragment.count("<li") == 1 and "something happened" in fragment
    assert int(cursor(fragment)) > int(since)
    assert "something happened" not in poll(as_alice, mine, "queued", cursor(fragment))


def test_a_bad_event_cursor_is_a_400(as_alice, mine):
    url = reverse("web:cluster", args=[mine.id])
    assert as_alice.get(url, {"since": "x"}, **HTMX).status_code == 400


def test_the_page_rests_once_the_cluster_does(as_alice, mine):
    Cluster.objects.filter(id=mine.id).update(state=S.RUNNING)
    html = page(as_alice, mine)
    assert "hx-trigger" not in re.search(r'<div id="cluster-poll"[^>]*>', html)[0]


def test_a_queued_cluster_shows_its_place_and_why_it_waits(as_alice, alice, pool):
    make_cluster(alice, wants(1, cores=1, memory_mb=64, disks=1), name="first")
    second = make_cluster(alice, wants(1, cores=1, memory_mb=64, disks=1), name="second")
    html = page(as_alice, second)
    assert "2 of 2 in the queue (first come, first served)" in html
    assert "Why it waits: waits its turn: 1 cluster ahead of it goes first" in html


def logs(client, cluster: Cluster, **query) -> str:
    response = client.get(reverse("web:cluster-logs", args=[cluster.id]), query, **HTMX)
    assert response.status_code == 200
    return response.content.decode()


def test_the_logs_panel_says_when_there_is_no_container_yet(as_alice, mine):
    html = logs(as_alice, mine, instance="worker-1", tail="10")
    assert "worker-1 has no container yet: the cluster is queued." in html
    assert "hx-trigger" not in html


def test_the_logs_panel_names_bad_input(as_alice, mine):
    assert "Lines: " in logs(as_alice, mine, tail="0")
    assert "Lines: give a whole number" in logs(as_alice, mine, tail="x")
    assert "has no instance &#x27;nope&#x27;" in logs(as_alice, mine, instance="nope")


def test_another_user_gets_404_for_my_logs(client, bob, mine):
    client.force_login(bob)
    url = reverse("web:cluster-logs", args=[mine.id])
    assert client.get(url, {"instance": "worker-0"}, **HTMX).status_code == 404


def test_staff_too_see_only_their_own_clusters_on_these_pages(client, admin_user, mine):
    """Self-service pages: the access rule narrowed to the owner (the API shows staff all)."""
    client.force_login(admin_user)
    assert client.get(reverse("web:cluster", args=[mine.id])).status_code == 404
    assert mine.name not in client.get(reverse("web:clusters"), {"state": "all"}).content.decode()


@pytest.fixture
def placed(mine) -> Cluster:
    reserve(mine.id)
    return mine


def test_the_logs_panel_shows_the_last_lines(as_alice, placed, monkeypatch):
    asked = fake_logs.install(monkeypatch)
    html = logs(as_alice, placed, instance="worker-1", tail="3")
    assert "worker-1 on n" in html and "the last 3 lines" in html
    assert re.search(r'<pre id="log-lines"[^>]*>\nline 27\nline 28\nline 29\n</pre>', html)
    assert "hx-trigger" not in html
    assert asked[0].endswith(f"-c{placed.id}-worker-1")


def test_follow_polls_every_2s_and_appends_only_new_lines(as_alice, placed, monkeypatch):
    fake_logs.install(monkeypatch)
    html = logs(as_alice, placed, instance="worker-0", tail="3", follow="1")
    poller = re.search(r'<div id="log-follow" hx-get="([^"]+)" hx-trigger="every 2s"', html)
    assert poller, html
    assert "after=2026-11-24T17%3A00%3A29.123456789Z" in poller[1]

    later = ("2026-11-24T17:01:00.500000000Z", "<new>")
    fake_logs.install(monkeypatch, lines=[*fake_logs.LINES, later])
    more = as_alice.get(poller[1].replace("&amp;", "&"), **HTMX).content.decode()
    assert '<div hx-swap-oob="beforeend:#log-lines">&lt;new&gt;\n</div>' in more
    assert "line 29" not in more
    assert "after=2026-11-24T17%3A01%3A00.500000000Z" in more  # the next cursor


def test_follow_ends_when_the_container_stopped(as_alice, placed, monkeypatch):
    fake_logs.install(monkeypatch, status="exited")
    url = reverse("web:cluster-logs", args=[placed.id])
    after = fake_logs.LINES[-1][0]
    query = {"instance": "worker-0", "follow": "1", "more": "1", "after": after}
    more = as_alice.get(url, query, **HTMX).content.decode()
    assert "hx-trigger" not in more and "beforeend" not in more
    assert "The container is not running: nothing more comes." in more


def test_follow_ends_with_the_reason_when_the_container_is_gone(as_alice, placed, monkeypatch):
    url = reverse("web:cluster-logs", args=[placed.id])
    query = {"instance": "worker-0", "follow": "1", "more": "1", "after": "x"}
    more = as_alice.get(url, query, **HTMX).content.decode()
    assert "hx-trigger" not in more and "is not a log timestamp" in more


def test_a_page_left_open_stops_following_after_30_minutes(as_alice, placed, monkeypatch):
    fake_logs.install(monkeypatch)
    url = reverse("web:cluster-logs", args=[placed.id])
    query = {"instance": "worker-0", "follow": "1", "more": "1", "after": fake_logs.LINES[-1][0]}
    going = as_alice.get(url, {**query, "polls": "899"}, **HTMX).content.decode()
    assert 'hx-trigger="every 2s"' in going and "polls=900" in going
    paused = as_alice.get(url, {**query, "polls": "900"}, **HTMX).content.decode()
    assert "hx-trigger" not in paused
    assert "Follow paused after 30 minutes: press Show to go on." in paused
