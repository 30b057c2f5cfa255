"""The one-time ticket and the UI host's cookie: single use, short-lived, and good only for
the host, user and cluster they were made for."""

import time
from urllib.parse import urlsplit

import pytest
from django.conf import settings
from django.test import Client

from apps.proxy import tickets
from apps.proxy.tests.upstream import cluster_on

pytestmark = pytest.mark.django_db

PORT = 8080


@pytest.fixture
def cluster(alice):
    return cluster_on(alice, PORT, 4040)


@pytest.fixture
def bobs(bob):
    return cluster_on(bob, PORT, 4040)


def ui_path(cluster) -> str:
    return f"/clusters/{cluster.id}/ui/master-0/{PORT}/"


def host(cluster) -> str:
    return f"c{cluster.id}.ui.localhost"


def minted(user, cluster) -> tuple[str, str]:
    """(host, path with the ticket) the portal sent user's browser to."""
    portal = Client()
    portal.force_login(user)
    answer = portal.get(ui_path(cluster))
    assert answer.status_code == 302, answer
    url = urlsplit(answer["Location"])
    return url.netloc, f"{url.path}?{url.query}"


def later(monkeypatch, seconds: float) -> None:
    """Signatures checked as if this many seconds had passed."""
    now = time.time()
    monkeypatch.setattr("django.core.signing.time.time", lambda: now + seconds)


def test_a_ticket_gives_the_ui_host_a_cookie_and_sends_it_on_to_the_clean_path(alice, cluster):
    where, ticket = minted(alice, cluster)
    assert where == host(cluster)
    browser = Client(HTTP_HOST=where)
    answer = browser.get(ticket)
    assert answer.status_code == 302
    assert answer["Location"] == ui_path(cluster)  # no ticket left in the address
    cookie = answer.cookies[settings.UI_COOKIE_NAME]
    assert cookie["httponly"] is True
    assert cookie["samesite"] == "Lax"
    assert cookie["domain"] == ""  # host-only: never sent to another cluster's host
    assert cookie["max-age"] == settings.UI_COOKIE_SECONDS
    assert "sessionid" not in answer.cookies
    assert answer["Referrer-Policy"] == "no-referrer"


def test_a_ticket_is_good_once(alice, cluster):
    where, ticket = minted(alice, cluster)
    assert Client(HTTP_HOST=where).get(ticket).status_code == 302
    again = Client(HTTP_HOST=where).get(ticket)
    assert again.status_code == 404
    assert settings.UI_COOKIE_NAME not in again.cookies


def test_a_ticket_expires(alice, cluster, monkeypatch):
    where, ticket = minted(alice, cluster)
    later(monkeypatch, settings.UI_TICKET_SECONDS + 1)
    assert Client(HTTP_HOST=where).get(ticket).status_code == 404


def test_a_ticket_works_only_on_the_host_it_was_made_for(alice, cluster, bobs):
    _, ticket = minted(alice, cluster)
    assert Client(HTTP_HOST=host(bobs)).get(ticket).status_code == 404
    forged = ticket[:-3] + ("AAA" if not ticket.endswith("AAA") else "BBB")
    assert Client(HTTP_HOST=host(cluster)).get(forged).status_code == 404


def test_a_user_without_access_gets_no_ticket(bob, cluster):
    portal = Client()
    portal.force_login(bob)
    assert portal.get(ui_path(cluster)).status_code == 404


def owner_browser(user, cluster) -> Client:
    where, ticket = minted(user, cluster)
    browser = Client(HTTP_HOST=where)
    assert browser.get(ticket).status_code == 302
    return browser


def test_the_cookie_is_bound_to_its_host_and_cluster(alice, bob, cluster, bobs):
    alices = owner_browser(alice, cluster).cookies[settings.UI_COOKIE_NAME].value
    # Carried to bob's cluster's host (where alice has no access anyway): worth nothing there.
    elsewhere = Client(HTTP_HOST=host(bobs))
    elsewhere.cookies[settings.UI_COOKIE_NAME] = alices
    assert elsewhere.post(ui_path(bobs), HTTP_ORIGIN=f"http://{host(bobs)}").status_code == 403
    answer = elsewhere.get(ui_path(bobs))
    assert answer.status_code == 403  # no cookie for this host, and no portal to send it to
    assert tickets.grant_of(_request(elsewhere, bobs), host(bobs), bobs.id) is None


def test_another_users_cookie_or_ticket_does_not_open_a_cluster(alice, bob, cluster):
    # bob's cookie for alice's cluster, as if minted while he had access: 404 now.
    browser = Client(HTTP_HOST=host(cluster))
    browser.cookies[settings.UI_COOKIE_NAME] = tickets.cookie_value(
        bob, cluster.id, host(cluster), "http://testserver"
    )
    assert browser.get(ui_path(cluster) + "echo").status_code == 404
    # ...and a ticket made out to bob for it.
    ticket = tickets.mint_ticket(bob, cluster.id, host(cluster), ui_path(cluster), "")
    fresh = Client(HTTP_HOST=host(cluster))
    assert fresh.get(f"{tickets.TICKET_PATH}?t={ticket}").status_code == 302
    assert fresh.get(ui_path(cluster) + "echo").status_code == 404


def test_an_expired_cookie_goes_back_to_the_portal_for_a_new_ticket(alice, cluster, monkeypatch):
    browser = owner_browser(alice, cluster)
    later(monkeypatch, settings.UI_COOKIE_SECONDS + 1)
    answer = browser.get(ui_path(cluster) + "jobs/?id=1")
    assert answer.status_code == 302
    assert answer["Location"] == f"http://testserver{ui_path(cluster)}jobs/?id=1"
    assert browser.post(ui_path(cluster), HTTP_ORIGIN=f"http://{host(cluster)}").status_code == 403


def test_a_password_change_ends_the_ui_cookies(alice, cluster):
    browser = owner_browser(alice, cluster)
    alice.set_password("a-new-password-456")
    alice.save()
    answer = browser.get(ui_path(cluster) + "echo")
    assert answer.status_code == 302  # back to the portal, which asks to sign in again
    assert answer["Location"].startswith("http://testserver/")


def _request(client: Client, cluster):
    """The request client would send to cluster's UI host, for calling grant_of directly."""
    from django.test import RequestFactory

    request = RequestFactory(HTTP_HOST=host(cluster)).get(ui_path(cluster))
    request.COOKIES = {k: v.value for k, v in client.cookies.items()}
    return request
