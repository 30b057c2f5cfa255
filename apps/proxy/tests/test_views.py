"""The proxy against a real HTTP server on 127.0.0.1 standing in for a cluster member."""

import json
import socket

import pytest
from django.test import Client

from apps.proxy.tests.upstream import RELEASE_STREAM, cluster_on, open_ui, start_upstream

pytestmark = pytest.mark.django_db


@pytest.fixture(scope="module")
def upstream():
    server = start_upstream()
    yield server
    server.shutdown()


@pytest.fixture
def closed_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]  # nothing listens once the socket is closed


@pytest.fixture
def cluster(alice, upstream, closed_port):
    cluster = cluster_on(alice, upstream.server_port, closed_port)
    upstream.cluster_root = f"/clusters/{cluster.id}/ui"
    return cluster


@pytest.fixture
def ui(cluster, upstream):
    """This cluster's master UI path (on the portal and on the cluster's UI host)."""
    return f"/clusters/{cluster.id}/ui/master-0/{upstream.server_port}"


@pytest.fixture
def owner(alice, ui):
    """alice's browser on her cluster's UI host, with its cookie (and nothing of the portal)."""
    return open_ui(alice, f"{ui}/")


@pytest.fixture
def origin(cluster):
    return f"http://c{cluster.id}.ui.localhost"


def body(response) -> bytes:
    return b"".join(response.streaming_content)


def echo(response) -> dict:
    assert response.status_code == 200, response
    return json.loads(body(response))


# ------------------------------------------------------------------ who may see it


def test_it_sends_anonymous_visitors_to_sign_in(client, ui):
    response = client.get(f"{ui}/page.html")
    assert response.status_code == 302
    assert response["Location"].startswith("/accounts/login/?next=")


def test_it_answers_404_to_another_user(client, bob, ui):
    client.force_login(bob)
    assert client.get(f"{ui}/page.html").status_code == 404


def test_it_serves_the_owner_and_staff_on_the_clusters_ui_host(alice, admin_user, ui):
    for user in (alice, admin_user):
        browser = open_ui(user, f"{ui}/")
        assert browser.get(f"{ui}/echo").status_code == 200


@pytest.mark.parametrize(
    "where",
    [
        "master-0/7077/",  # a port that is no UI
        "master-0/9999/",  # a port the version does not declare
        "nobody-0/{port}/",  # no such member
        "worker-0/{port}/",  # the UI port of another role
    ],
)
def test_it_answers_404_for_anything_not_a_declared_ui(client, alice, cluster, upstream, where):
    client.force_login(alice)
    path = where.format(port=upstream.server_port)
    assert client.get(f"/clusters/{cluster.id}/ui/{path}").status_code == 404


def test_it_answers_404_once_the_instances_are_released(client, alice, cluster, ui):
    cluster.instances.update(active=False)
    client.force_login(alice)
    assert client.get(f"{ui}/echo").status_code == 404


# ------------------------------------------------------------------ what goes upstream


def test_it_passes_method_path_query_and_body(owner, ui, origin):
    got = echo(
        owner.post(
            f"{ui}/submit/a%20b?x=1&y=%2F",
            "k=v",
            HTTP_ORIGIN=origin,
            content_type="application/x-www-form-urlencoded",
        )
    )
    assert got["method"] == "POST"
    assert got["path"] == "/submit/a%20b?x=1&y=%2F"
    assert got["body"] == "k=v"
    assert got["headers"]["content-type"] == "application/x-www-form-urlencoded"


def test_it_keeps_cookies_and_credentials_to_itself(owner, ui):
    owner.cookies["csrftoken"] = "secret-csrf"
    got = echo(
        owner.get(
            f"{ui}/echo",
            HTTP_AUTHORIZATION="Bearer tok",
            HTTP_X_CSRFTOKEN="t",
            HTTP_ACCEPT="text/html",
            HTTP_X_FORWARDED_FOR="1.2.3.4",
        )
    )
    headers = got["headers"]
    assert "cookie" not in headers
    assert "authorization" not in headers
    assert "x-csrftoken" not in headers
    assert "x-forwarded-for" not in headers
    assert headers["accept"] == "text/html"
    assert headers["accept-encoding"] == "identity"


def test_it_takes_writes_from_its_own_pages_without_the_portals_csrf_token(owner, ui, origin):
    assert owner.post(f"{ui}/kill", HTTP_ORIGIN=origin).status_code == 200
    assert owner.post(f"{ui}/kill", HTTP_REFERER=f"{origin}{ui}/jobs/").status_code == 200


def test_it_refuses_writes_from_other_origins(owner, ui, cluster):
    assert owner.post(f"{ui}/kill").status_code == 403
    for other in (
        "http://evil.example",
        "http://testserver",  # the portal itself
        f"http://c{cluster.id + 1}.ui.localhost",  # a sibling cluster: same site, not origin
        "null",  # a sandboxed page
    ):
        assert owner.post(f"{ui}/kill", HTTP_ORIGIN=other).status_code == 403, other
    assert owner.post(f"{ui}/kill", HTTP_REFERER="http://testserver/x").status_code == 403


def test_it_answers_only_navigations_to_other_sites_pages(owner, ui, origin):
    # A sibling cluster's script (same site) fetching this UI: refused, whatever CORS says.
    fetched = {"HTTP_SEC_FETCH_SITE": "same-site", "HTTP_SEC_FETCH_MODE": "cors"}
    assert owner.get(f"{ui}/echo", **fetched).status_code == 403
    embedded = {"HTTP_SEC_FETCH_SITE": "cross-site", "HTTP_SEC_FETCH_MODE": "no-cors"}
    assert owner.get(f"{ui}/echo", HTTP_SEC_FETCH_DEST="script", **embedded).status_code == 403
    navigated = {"HTTP_SEC_FETCH_SITE": "cross-site", "HTTP_SEC_FETCH_MODE": "navigate"}
    assert owner.get(f"{ui}/echo", HTTP_SEC_FETCH_DEST="document", **navigated).status_code == 200
    mine = {"HTTP_SEC_FETCH_SITE": "same-origin", "HTTP_SEC_FETCH_MODE": "cors"}
    assert owner.get(f"{ui}/echo", **mine).status_code == 200


def test_it_installs_no_service_worker(owner, ui):
    refused = owner.get(f"{ui}/sw.js", HTTP_SERVICE_WORKER="script")
    assert refused.status_code == 403
    plain = owner.get(f"{ui}/sw.js")
    assert plain.status_code == 200
    assert "Service-Worker-Allowed" not in plain


# ------------------------------------------------------------------ what comes back


def test_it_rewrites_links_in_html_and_drops_upstream_cookies(owner, ui, cluster):
    response = owner.get(f"{ui}/page.html")
    page = body(response).decode()
    assert f'href="{ui}/static/app.css"' in page
    assert f"src='{ui}/static/app.js'" in page
    assert f"url({ui}/img/bg.png)" in page
    assert f'href="{ui}/jobs/?id=1"' in page
    assert f'HREF = "{ui}/Upper"' in page
    assert f'action="{ui}/kill"' in page
    assert 'href="//cdn.example.org/x.js"' in page
    assert 'href="relative/x"' in page
    assert f'href="/clusters/{cluster.id}/ui/master-0/4040/"' in page  # already proxied
    assert "ui=1" not in response.cookies
    assert "Set-Cookie" not in response
    assert "Content-Length" not in response  # the body changed length


def test_it_rewrites_css_but_passes_other_bodies_untouched(owner, ui):
    css = body(owner.get(f"{ui}/app.css")).decode()
    assert f'url("{ui}/img/a.png")' in css
    assert f"url({ui}/b.png)" in css
    raw = owner.get(f"{ui}/data.bin")
    assert body(raw) == b'href="/not-rewritten"'
    assert raw["Content-Length"] == str(len(b'href="/not-rewritten"'))


def test_it_streams(owner, ui):
    RELEASE_STREAM.clear()
    response = owner.get(f"{ui}/stream")
    chunks = iter(response.streaming_content)
    # The first chunk arrives while the upstream still holds back the last one.
    assert next(chunks) == b"first\n"
    RELEASE_STREAM.set()
    assert b"".join(chunks) == b"last\n"


@pytest.mark.parametrize(
    ("kind", "expected"),
    [
        ("absolute", "{ui}/target?x=1"),
        ("path", "{ui}/target"),
        ("worker", "/clusters/{cluster}/ui/worker-0/{port}/w"),
    ],
)
def test_it_rewrites_redirects_onto_the_clusters_ui_origin(
    owner, ui, cluster, upstream, origin, kind, expected
):
    response = owner.get(f"{ui}/redirect?{kind}")
    assert response.status_code == 302
    want = expected.format(ui=ui, cluster=cluster.id, port=upstream.server_port)
    assert response["Location"] == origin + want


@pytest.mark.parametrize("kind", ["away", "backslash"])
def test_it_never_redirects_outside_the_cluster(owner, ui, kind):
    response = owner.get(f"{ui}/redirect?{kind}")
    assert response.status_code == 502
    assert "Location" not in response
    assert b"redirected outside the cluster" in response.content


def test_it_drops_headers_that_act_on_the_browser_beyond_the_page(owner, ui):
    response = owner.get(f"{ui}/browser-headers")
    assert response.status_code == 200
    for name in ("Refresh", "Clear-Site-Data", "Service-Worker-Allowed", "Alt-Svc", "NEL"):
        assert name not in response, name
    assert "Report-To" not in response
    assert response["Cross-Origin-Resource-Policy"] == "same-origin"


def test_it_sets_its_own_policy_and_keeps_the_uis_without_reports(owner, ui):
    response = owner.get(f"{ui}/policy")
    ours, theirs = response["Content-Security-Policy"].split(", ")
    assert "script-src 'self' 'unsafe-inline' 'unsafe-eval'" in ours
    assert "connect-src 'self'" in ours
    assert "form-action 'self'" in ours
    assert theirs == "script-src 'nonce-abc'"  # report-uri dropped
    assert "Access-Control-Allow-Origin" not in response
    assert "Strict-Transport-Security" not in response
    assert "X-Hop" not in response  # named in Connection: hop-by-hop
    assert response["X-Custom"] == "kept"
    assert response["Cache-Control"] == "private, no-cache"


def test_on_the_portals_origin_it_serves_nothing_unless_allowed_and_then_sandboxed(
    client, alice, ui, settings
):
    settings.UI_DOMAIN = ""
    client.force_login(alice)
    refused = client.get(f"{ui}/echo")
    assert refused.status_code == 404
    assert b"PLATTER_UI_DOMAIN" in refused.content
    settings.PROXY_ON_PORTAL_ORIGIN = True
    served = client.get(f"{ui}/echo")
    assert served.status_code == 200
    policy = served["Content-Security-Policy"]
    assert "sandbox allow-scripts" in policy
    assert "allow-same-origin" not in policy
    # A sandboxed page's forms send "Origin: null": no writes through the portal's origin.
    assert client.post(f"{ui}/kill", HTTP_ORIGIN="null").status_code == 403


def test_the_portals_cookies_are_not_readable_by_scripts_nor_sent_to_ui_hosts(settings):
    assert settings.SESSION_COOKIE_HTTPONLY is True
    assert settings.CSRF_COOKIE_HTTPONLY is True
    # Host-only: a cookie with a Domain would reach the UI hosts under it.
    assert settings.SESSION_COOKIE_DOMAIN is None
    assert settings.CSRF_COOKIE_DOMAIN is None


# ------------------------------------------------------------------ when the UI does not answer


def test_a_port_nobody_listens_on_is_a_clear_502(alice, cluster, closed_port):
    path = f"/clusters/{cluster.id}/ui/master-0/{closed_port}/"
    response = open_ui(alice, path).get(path)
    assert response.status_code == 502
    page = response.content.decode()
    assert f"master-0:{closed_port} is not answering" in page
    assert "Content-Security-Policy" in response  # the portal's own page and policy
    assert "unsafe-inline" not in response["Content-Security-Policy"]
    assert f'href="http://testserver/clusters/{cluster.id}/"' in page  # the portal's page


def test_a_ui_that_answers_too_late_is_a_502(owner, ui, settings):
    settings.PROXY_READ_TIMEOUT = 1
    response = owner.get(f"{ui}/slow")
    assert response.status_code == 502
    assert b"did not answer in time" in response.content


# ------------------------------------------------------------------ an origin per cluster


def test_the_portal_sends_the_browser_to_the_clusters_ui_host_with_a_ticket(client, alice, ui):
    client.force_login(alice)
    response = client.get(f"{ui}/jobs/?id=1")
    assert response.status_code == 302
    assert response["Location"].startswith(f"http://c{ui.split('/')[2]}.ui.localhost/_platter/")
    # Only navigations get one, and only GET.
    assert client.get(f"{ui}/x", HTTP_SEC_FETCH_MODE="cors").status_code == 403
    assert client.post(f"{ui}/kill", HTTP_ORIGIN="http://testserver").status_code == 405


def test_a_ui_host_serves_no_portal_page(owner, cluster):
    for path in ("/", "/clusters/", f"/clusters/{cluster.id}/", "/api/v1/tokens", "/admin/"):
        assert owner.get(path).status_code == 404, path
    assert owner.get("/accounts/login/").status_code == 404
    assert owner.get("/healthz").status_code == 404
    # Another cluster's paths on this cluster's host: 404 too.
    assert owner.get(f"/clusters/{cluster.id + 1}/ui/master-0/80/").status_code == 404
    assert Client(HTTP_HOST="ui.localhost").get("/").status_code == 404
    assert Client(HTTP_HOST="www.ui.localhost").get("/").status_code == 404


def test_a_ui_path_without_its_trailing_slash_gets_one(owner, ui):
    response = owner.get(ui)
    assert response.status_code == 301
    assert response["Location"] == f"{ui}/"
