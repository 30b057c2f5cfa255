"""What production answers over the wire: gunicorn on portal.settings.prod (secrets from
``*_FILE`` paths) behind an imagined TLS proxy that sets X-Forwarded-Proto."""

import re
from http.cookies import SimpleCookie

import httpx
import pytest
from django.conf import settings
from django.contrib.auth.hashers import PBKDF2PasswordHasher

pytestmark = pytest.mark.django_db(transaction=True)  # the server sees only committed rows
HTTPS = {"X-Forwarded-Proto": "https"}


@pytest.fixture(scope="module")
def server(prod_server_factory):
    return prod_server_factory()


def cookies_of(response: httpx.Response) -> dict[str, dict]:
    """name -> {"value", attributes...} of every Set-Cookie (httpx's jar hides attributes)."""
    found = {}
    for header in response.headers.get_list("set-cookie"):
        jar = SimpleCookie()
        jar.load(header)
        for name, morsel in jar.items():
            flags = {flag.lower() for flag in re.findall(r";\s*(Secure|HttpOnly)", header)}
            found[name] = {"value": morsel.value, **dict(morsel.items()), "flags": flags}
    return found


def test_every_page_carries_the_security_headers(server):
    response = httpx.get(f"{server.url}/accounts/login/", headers=HTTPS)
    assert response.status_code == 200
    headers = response.headers
    assert headers["Strict-Transport-Security"] == "max-age=31536000; includeSubDomains; preload"
    assert headers["X-Content-Type-Options"] == "nosniff"
    assert headers["Referrer-Policy"] == "same-origin"
    assert headers["X-Frame-Options"] == "DENY"
    assert headers["Cross-Origin-Opener-Policy"] == "same-origin"
    policy = dict(
        [*part.strip().split(" ", 1), ""][:2]
        for part in headers["Content-Security-Policy"].split(";")
    )
    assert policy["default-src"] == "'self'"
    assert policy["script-src"] == "'self'" and policy["style-src"] == "'self'"
    assert policy["object-src"] == "'none'" and policy["frame-ancestors"] == "'none'"
    assert policy["form-action"] == "'self'" and policy["base-uri"] == "'self'"
    assert "unsafe-inline" not in headers["Content-Security-Policy"]


def test_plain_http_is_sent_to_https(server):
    response = httpx.get(f"{server.url}/clusters/?page=2")
    assert response.status_code == 301
    assert (
        response.headers["Location"]
        == f"https://127.0.0.1:{server.url.rsplit(':', 1)[1]}/clusters/?page=2"
    )
    assert "Strict-Transport-Security" not in response.headers  # only ever sent over HTTPS
    # The load balancer's health check is the one exception.
    assert httpx.get(f"{server.url}/healthz").status_code in (200, 503)


def sign_in(server, alice) -> tuple[httpx.Response, httpx.Response]:
    """(the sign-in form, the answer to posting it) for alice, over HTTPS."""
    # Test settings hash with MD5 for speed; production verifies with its own hashers.
    hasher = PBKDF2PasswordHasher()
    alice.password = hasher.encode("alice-pass-123", hasher.salt())
    alice.save()
    origin = server.url.replace("http://", "https://")
    form = httpx.get(f"{server.url}/accounts/login/", headers=HTTPS)
    csrf = cookies_of(form)["__Host-csrftoken"]
    found = re.search(rb'name="csrfmiddlewaretoken" value="([^"]+)"', form.content)
    assert found, form.text
    token = found.group(1)
    signed_in = httpx.post(
        f"{server.url}/accounts/login/",
        data={
            "username": "alice",
            "password": "alice-pass-123",
            "csrfmiddlewaretoken": token.decode(),
        },
        headers={**HTTPS, "Origin": origin, "Cookie": f"__Host-csrftoken={csrf['value']}"},
    )
    assert signed_in.status_code == 302, signed_in.text
    return form, signed_in


def test_signing_in_sets_secure_http_only_host_only_cookies(server, alice):
    form, signed_in = sign_in(server, alice)
    # __Host- names: browsers take them only Secure, for "/" and without a Domain.
    csrf = cookies_of(form)["__Host-csrftoken"]
    session = cookies_of(signed_in)["__Host-sessionid"]
    for cookie in (csrf, session):
        assert "secure" in cookie["flags"] and cookie["samesite"] == "Lax"
        assert cookie["path"] == "/" and cookie["domain"] == ""
    assert "httponly" in session["flags"]
    assert int(session["max-age"]) == settings.SESSION_COOKIE_AGE
    # The cookie is a working session, and the page the browser lands on says so.
    home = httpx.get(
        f"{server.url}/", headers={**HTTPS, "Cookie": f"__Host-sessionid={session['value']}"}
    )
    assert "Signed in as <strong>alice</strong>" in home.text


def test_cookies_a_sibling_host_plants_under_the_plain_names_count_for_nothing(server, alice):
    # A tenant's page on a UI host (cN.<UI_DOMAIN>, the same site as the portal) can set a
    # cookie for a parent domain under any name but a __Host- one. Planted as "sessionid", a
    # session of the attacker's choosing (here a real one) signs no one in...
    session = cookies_of(sign_in(server, alice)[1])["__Host-sessionid"]["value"]
    planted = httpx.get(f"{server.url}/", headers={**HTTPS, "Cookie": f"sessionid={session}"})
    assert "Signed in as" not in planted.text
    # ...and a CSRF token the attacker chose, planted as "csrftoken" and sent with a form
    # carrying the same token, passes no CSRF check.
    origin = server.url.replace("http://", "https://")
    chosen = "a" * 32

    def post_with(cookie: str) -> httpx.Response:
        return httpx.post(
            f"{server.url}/accounts/logout/",
            data={"csrfmiddlewaretoken": chosen},
            headers={**HTTPS, "Origin": origin, "Cookie": f"{cookie}={chosen}"},
        )

    assert post_with("csrftoken").status_code == 403
    # Only the portal's own Secure, host-only cookie carries a token (the browser enforces
    # the prefix; this shows the token is read from nowhere else).
    assert post_with("__Host-csrftoken").status_code == 302
