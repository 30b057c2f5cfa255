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


def test_signing_in_sets_secure_http_only_cookies(server, alice):
    # Test settings hash with MD5 for speed; production verifies with its own hashers.
    hasher = PBKDF2PasswordHasher()
    alice.password = hasher.encode("alice-pass-123", hasher.salt())
    alice.save()
    origin = server.url.replace("http://", "https://")
    form = httpx.get(f"{server.url}/accounts/login/", headers=HTTPS)
    csrf = cookies_of(form)["csrftoken"]
    assert "secure" in csrf["flags"] and csrf["samesite"] == "Lax"
    token = re.search(rb'name="csrfmiddlewaretoken" value="([^"]+)"', form.content).group(1)
    signed_in = httpx.post(
        f"{server.url}/accounts/login/",
        data={
            "username": "alice",
            "password": "alice-pass-123",
            "csrfmiddlewaretoken": token.decode(),
        },
        headers={**HTTPS, "Origin": origin, "Cookie": f"csrftoken={csrf['value']}"},
    )
    assert signed_in.status_code == 302, signed_in.text
    session = cookies_of(signed_in)["sessionid"]
    assert {"secure", "httponly"} <= session["flags"]
    assert session["samesite"] == "Lax"
    assert int(session["max-age"]) == settings.SESSION_COOKIE_AGE
    # The cookie is a working session, and the page the browser lands on says so.
    home = httpx.get(f"{server.url}/", headers={**HTTPS, "Cookie": f"sessionid={session['value']}"})
    assert "Signed in as <strong>alice</strong>" in home.text
