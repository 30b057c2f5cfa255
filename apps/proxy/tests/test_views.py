"""The proxy against a real HTTP server on 127.0.0.1 standing in for a cluster member."""

import json
import socket

import pytest

from apps.proxy.tests.upstream import RELEASE_STREAM, cluster_on, start_upstream

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
    """This cluster's master UI path on the portal."""
    return f"/clusters/{cluster.id}/ui/master-0/{upstream.server_port}"


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


def test_it_serves_the_owner_and_staff(client, alice, admin_user, ui):
    for user in (alice, admin_user):
        client.force_login(user)
        assert client.get(f"{ui}/echo").status_code == 200


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


def test_it_passes_method_path_query_and_body(client, alice, ui):
    client.force_login(alice)
    origin = "http://testserver"
    got = echo(
        client.post(
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


def test_it_keeps_the_portals_cookies_and_credentials_to_itself(client, alice, ui):
    client.force_login(alice)
    client.cookies["csrftoken"] = "secret-csrf"
    got = echo(
        client.get(
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


def test_it_refuses_writes_from_other_origins(client, alice, ui):
    client.force_login(alice)
    assert client.post(f"{ui}/kill").status_code == 403
    assert client.post(f"{ui}/kill", HTTP_ORIGIN="http://evil.example").status_code == 403
    ok = client.post(f"{ui}/kill", HTTP_REFERER="http://testserver/clusters/1/ui/x/1/")
    assert ok.status_code == 200


# ------------------------------------------------------------------ what comes back


def test_it_rewrites_links_in_html_and_drops_upstream_cookies(client, alice, ui, cluster):
    client.force_login(alice)
    response = client.get(f"{ui}/page.html")
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


def test_it_rewrites_css_but_passes_other_bodies_untouched(client, alice, ui):
    client.force_login(alice)
    css = body(client.get(f"{ui}/app.css")).decode()
    assert f'url("{ui}/img/a.png")' in css
    assert f"url({ui}/b.png)" in css
    raw = client.get(f"{ui}/data.bin")
    assert body(raw) == b'href="/not-rewritten"'
    assert raw["Content-Length"] == str(len(b'href="/not-rewritten"'))


def test_it_streams(client, alice, ui):
    client.force_login(alice)
    RELEASE_STREAM.clear()
    response = client.get(f"{ui}/stream")
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
def test_it_rewrites_redirects_to_proxy_paths(client, alice, ui, cluster, upstream, kind, expected):
    client.force_login(alice)
    response = client.get(f"{ui}/redirect?{kind}")
    assert response.status_code == 302
    want = expected.format(ui=ui, cluster=cluster.id, port=upstream.server_port)
    assert response["Location"] == want


def test_it_never_redirects_to_an_address_outside_the_cluster(client, alice, ui):
    client.force_login(alice)
    response = client.get(f"{ui}/redirect?away")
    assert response.status_code == 502
    assert "Location" not in response
    assert b"redirected outside the cluster" in response.content


def test_it_sets_its_own_policy_and_keeps_the_uis_without_reports(client, alice, ui):
    client.force_login(alice)
    response = client.get(f"{ui}/policy")
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


def test_it_can_sandbox_proxied_pages(client, alice, ui, settings):
    settings.PROXY_SANDBOX = True
    client.force_login(alice)
    policy = client.get(f"{ui}/echo")["Content-Security-Policy"]
    assert "sandbox allow-scripts" in policy
    assert "allow-same-origin" not in policy


def test_the_portals_session_cookie_is_not_readable_by_scripts(settings):
    assert settings.SESSION_COOKIE_HTTPONLY is True


# ------------------------------------------------------------------ when the UI does not answer


def test_a_port_nobody_listens_on_is_a_clear_502(client, alice, cluster, closed_port):
    client.force_login(alice)
    response = client.get(f"/clusters/{cluster.id}/ui/master-0/{closed_port}/")
    assert response.status_code == 502
    page = response.content.decode()
    assert f"master-0:{closed_port} is not answering" in page
    assert "Content-Security-Policy" in response  # the portal's own page and policy
    assert "unsafe-inline" not in response["Content-Security-Policy"]


def test_a_ui_that_answers_too_late_is_a_502(client, alice, ui, settings):
    settings.PROXY_READ_TIMEOUT = 1
    client.force_login(alice)
    response = client.get(f"{ui}/slow")
    assert response.status_code == 502
    assert b"did not answer in time" in response.content


# ------------------------------------------------------------------ a separate origin for UIs


def test_with_a_ui_origin_uis_and_portal_pages_never_share_a_host(client, alice, ui, settings):
    settings.PROXY_ORIGIN = "http://ui.testserver"
    settings.ALLOWED_HOSTS = ["testserver", "ui.testserver"]
    client.force_login(alice)
    assert client.get(f"{ui}/echo").status_code == 404
    assert client.get(f"{ui}/echo", HTTP_HOST="ui.testserver").status_code == 200
    assert client.get("/clusters/", HTTP_HOST="ui.testserver").status_code == 404
    assert client.get("/clusters/").status_code == 200


def test_a_ui_path_without_its_trailing_slash_gets_one(client, alice, ui):
    client.force_login(alice)
    response = client.get(ui)
    assert response.status_code == 301
    assert response["Location"] == f"{ui}/"
