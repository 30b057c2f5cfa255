"""Secrets stay secret: a token's text is answered once, at creation, and never again (API,
pages, admin, logs); a password typed at sign-in is not logged or stored; production's error
pages and logs never show SECRET_KEY, the database password or the metrics token."""

import logging

import httpx
import pytest
from axes.models import AccessAttempt
from django.contrib import admin
from django.urls import reverse

from apps.tokens.models import ApiToken

from .conftest import free_port


@pytest.fixture
def logs(caplog):
    caplog.set_level(logging.DEBUG)  # everything any logger says, at every level
    return caplog


def test_a_tokens_text_is_answered_once_and_never_again(client, alice, admin_user, logs):
    client.force_login(alice)
    created = client.post("/api/v1/tokens", {"name": "laptop"}, content_type="application/json")
    assert created.status_code == 201
    raw = created.json()["token"]
    secret_part = raw.split("_", 2)[2]  # plt_<prefix>_<secret>; the secret may hold "_"
    assert len(secret_part) >= 40

    # The token works...
    used = client.get("/api/v1/clusters", HTTP_AUTHORIZATION=f"Bearer {raw}")
    assert used.status_code == 200
    # ...and nothing shows it again: the API, the tokens page, any admin page.
    token = ApiToken.objects.get(user=alice, name="laptop")
    answers = [
        used,
        client.get("/api/v1/tokens"),
        client.get(f"/api/v1/tokens/{token.id}"),
        client.get("/api/v1/tokens", HTTP_AUTHORIZATION=f"Bearer {raw}"),
        client.get("/tokens/"),
    ]
    client.force_login(admin_user)
    answers += [client.get(reverse("admin:tokens_apitoken_change", args=[token.id]))]
    for model in admin.site._registry:
        meta = model._meta
        answers.append(client.get(reverse(f"admin:{meta.app_label}_{meta.model_name}_changelist")))
    assert all(answer.status_code == 200 for answer in answers), [
        (a.request["PATH_INFO"], a.status_code) for a in answers if a.status_code != 200
    ]
    for answer in answers:
        assert secret_part not in answer.content.decode(), answer.request["PATH_INFO"]
    assert (
        token.digest not in client.get(reverse("admin:tokens_apitoken_changelist")).content.decode()
    )
    # Nor does any log line of the whole exchange.
    assert logs.records
    assert secret_part not in logs.text
    assert all(secret_part not in str(record.__dict__) for record in logs.records)


def test_a_password_typed_at_sign_in_is_neither_logged_nor_stored(client, alice, logs):
    typed = "Hunter2-typed-by-mistake"
    client.post("/accounts/login/", {"username": "alice", "password": typed})
    assert AccessAttempt.objects.filter(username="alice").exists()  # the failure was recorded
    assert typed not in logs.text
    assert all(typed not in str(record.__dict__) for record in logs.records)
    for attempt in AccessAttempt.objects.all():
        assert typed not in f"{attempt.get_data} {attempt.post_data}"


@pytest.mark.django_db(transaction=True)
def test_production_error_pages_and_logs_show_no_secret(prod_server_factory):
    https = {"X-Forwarded-Proto": "https"}
    # A server whose database is down: pages that need it fail with a 500.
    broken = prod_server_factory(database_port=free_port())
    answers = [
        httpx.get(f"{broken.url}/", headers={**https, "Cookie": "__Host-sessionid=" + "a" * 32}),
        httpx.get(f"{broken.url}/healthz"),
    ]
    assert [a.status_code for a in answers] == [500, 503]
    # A healthy one: unknown pages, unknown hosts.
    healthy = prod_server_factory()
    answers += [
        httpx.get(f"{healthy.url}/no/such/page", headers=https),
        httpx.get(f"{healthy.url}/", headers={**https, "Host": "evil.example"}),
    ]
    assert [a.status_code for a in answers[2:]] == [404, 400]
    # The metrics token came from its *_FILE too: it opens /metrics, which is not an error.
    scrape = {**https, "Authorization": f"Bearer {healthy.metrics_token}"}
    assert httpx.get(f"{healthy.url}/metrics", headers=scrape).status_code == 200
    for server in (broken, healthy):
        for answer in answers:
            assert server.secret_key not in answer.text
            assert server.db_password not in answer.text
            assert server.metrics_token not in answer.text
            assert "Traceback" not in answer.text
        output = server.output()
        assert "GET /" in output  # the server did log the requests
        assert server.secret_key not in output and server.db_password not in output
        assert server.metrics_token not in output
    assert "Traceback" in broken.output()  # the 500 was logged, with its cause, for operators
