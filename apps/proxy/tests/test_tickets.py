"""The one-time ticket and the UI host's cookie: single use, short-lived, good only for the
host, user and cluster they were made for, and the ticket only in the browser that asked."""

import time
from urllib.parse import urlsplit

import pytest
from django.conf import settings
from django.test import Client

from apps.proxy import tickets
from apps.proxy.tests.upstream import cluster_on, go, ticket_for

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


def signed_in(user) -> Client:
    portal = Client()
    portal.force_login(user)
    return portal


def minted(user, cluster) -> tuple[Client, str]:
    """(the asking browser on the UI host, the path with the ticket the portal sent it to)."""
    return ticket_for(signed_in(user), ui_path(cluster))


def later(monkeypatch, seconds: float) -> None:
    """Signatures checked as if this many seconds had passed."""
    now = time.time()
    monkeypatch.setattr("django.core.signing.time.time", lambda: now + seconds)


def test_a_ticket_gives_the_ui_host_a_cookie_and_sends_it_on_to_the_clean_path(alice, cluster):
    browser, ticket = minted(alice, cluster)
    assert browser.defaults["HTTP_HOST"] == host(cluster)
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
    browser, ticket = minted(alice, cluster)
    assert browser.get(ticket).status_code == 302
    again = browser.get(ticket)
    assert again.status_code == 404
    assert settings.UI_COOKIE_NAME not in again.cookies


def test_a_ticket_expires(alice, cluster, monkeypatch):
    browser, ticket = minted(alice, cluster)
    later(monkeypatch, settings.UI_TICKET_SECONDS + 1)
    assert browser.get(ticket).status_code == 404


def test_a_ticket_works_only_on_the_host_it_was_made_for(alice, cluster, bobs):
    browser, ticket = minted(alice, cluster)
    # Even with the asking browser's nonce: another cluster's host takes no ticket of this one.
    elsewhere = Client(HTTP_HOST=host(bobs))
    name = tickets.bind_cookie_name()
    elsewhere.cookies[name] = browser.cookies[name].value
    assert elsewhere.get(ticket).status_code == 404
    forged = ticket[:-3] + ("AAA" if not ticket.endswith("AAA") else "BBB")
    assert browser.get(forged).status_code == 404


def test_a_user_without_access_gets_no_ticket(bob, cluster):
    portal = Client()
    portal.force_login(bob)
    assert portal.get(ui_path(cluster)).status_code == 404


def owner_browser(user, cluster) -> Client:
    browser, ticket = minted(user, cluster)
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
    # ...and a ticket made out to bob for it (in bob's browser, with its nonce).
    fresh = Client(HTTP_HOST=host(cluster))
    nonce = "n" * 43
    fresh.cookies[tickets.bind_cookie_name()] = nonce
    binding = tickets.binding_of(nonce)
    ticket = tickets.mint_ticket(bob, cluster.id, host(cluster), ui_path(cluster), "", binding)
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


# ------------------------------------------------------------------ only the asking browser


def test_a_ticket_url_opened_by_another_client_is_refused(alice, cluster):
    browser, ticket = minted(alice, cluster)
    # The ticket's URL leaked (a proxy's log, a Referer): whoever opens it has no nonce.
    thief = Client(HTTP_HOST=host(cluster))
    stolen = thief.get(ticket)
    assert stolen.status_code == 404
    assert b"opened in another browser" in stolen.content
    assert settings.UI_COOKIE_NAME not in stolen.cookies
    assert thief.get(ui_path(cluster) + "echo").status_code == 403
    # The try used the ticket up: the asker opens the UI again rather than the thief winning.
    assert browser.get(ticket).status_code == 404


def test_a_thief_with_a_nonce_of_its_own_is_refused_too(alice, cluster):
    browser, ticket = minted(alice, cluster)
    # The thief took the UI host's first step itself (any state will do): a nonce, not alice's.
    thief = Client(HTTP_HOST=host(cluster))
    assert go(thief, signed_in(alice).get(ui_path(cluster))["Location"]).status_code == 302
    name = tickets.bind_cookie_name()
    assert thief.cookies[name].value != browser.cookies[name].value
    assert thief.get(ticket).status_code == 404
    assert settings.UI_COOKIE_NAME not in thief.cookies


def test_the_asking_browser_gets_in_and_its_nonce_never_travels_in_a_url(alice, cluster):
    portal = signed_in(alice)
    bind = portal.get(ui_path(cluster))
    browser = Client(HTTP_HOST=host(cluster))
    back = go(browser, bind["Location"])
    nonce = browser.cookies[tickets.bind_cookie_name()]
    assert nonce["httponly"] is True and nonce["path"] == "/" and nonce["domain"] == ""
    assert back["Referrer-Policy"] == "no-referrer"
    minted_ = go(portal, back["Location"])
    for url in (bind["Location"], back["Location"], minted_["Location"]):
        assert nonce.value not in url
    assert go(browser, minted_["Location"]).status_code == 302
    grant = tickets.grant_of(_request(browser, cluster), host(cluster), cluster.id)
    assert grant is not None and grant.user == alice


def test_uis_opened_at_once_in_one_browser_all_get_in(alice, cluster):
    portal = signed_in(alice)
    browser = Client(HTTP_HOST=host(cluster))
    first = go(portal, go(browser, portal.get(ui_path(cluster))["Location"])["Location"])
    second = go(portal, go(browser, portal.get(ui_path(cluster) + "jobs/")["Location"])["Location"])
    assert go(browser, first["Location"]).status_code == 302
    assert go(browser, second["Location"])["Location"] == ui_path(cluster) + "jobs/"


def test_the_portal_gives_a_ticket_only_to_the_user_the_state_was_made_for(alice, bob, cluster):
    bind = signed_in(alice).get(ui_path(cluster))["Location"]
    back = go(Client(HTTP_HOST=host(cluster)), bind)["Location"]
    # bob's browser sent to the portal with alice's state: no ticket for bob.
    refused = go(signed_in(bob), back)
    assert refused.status_code == 403
    # Signed out: to the sign-in page, and from there to the UI's path, not to the ticket.
    anonymous = go(Client(), back)
    assert anonymous.status_code == 302
    assert anonymous["Location"].startswith("/accounts/login/?next=")
    assert "ui-ticket" not in anonymous["Location"]


def test_a_forged_state_or_binding_gets_nothing(alice, cluster, bobs):
    bind = urlsplit(signed_in(alice).get(ui_path(cluster))["Location"])
    # alice's state on another cluster's UI host: refused there, with no nonce given.
    elsewhere = Client(HTTP_HOST=host(bobs))
    refused = elsewhere.get(f"{bind.path}?{bind.query}")
    assert refused.status_code == 404
    assert tickets.bind_cookie_name() not in refused.cookies
    back = urlsplit(go(Client(HTTP_HOST=host(cluster)), bind.geturl())["Location"])
    portal = signed_in(alice)
    for query in (back.query.replace("b=", "b=0"), back.query.replace("s=", "s=x")):
        assert portal.get(f"{back.path}?{query}").status_code == 404


def test_production_names_the_nonce_cookie_host_only(alice, cluster, settings):
    settings.SESSION_COOKIE_SECURE = True
    bind = signed_in(alice).get(ui_path(cluster))["Location"]
    answer = go(Client(HTTP_HOST=host(cluster)), bind)
    cookie = answer.cookies["__Host-platter-ui-bind"]
    assert cookie["secure"] is True and cookie["path"] == "/" and cookie["domain"] == ""
