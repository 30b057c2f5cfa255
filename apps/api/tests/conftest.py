"""API personas: each a way of calling the API, as the permission matrices name them."""

import uuid
from datetime import timedelta

import pytest
from django.conf import settings
from django.utils import timezone
from rest_framework.test import APIClient
from rest_framework.throttling import SimpleRateThrottle

from apps.catalog.tests.rows import catalog_rows
from apps.clusters.models import Cluster
from apps.clusters.names import free_name
from apps.clusters.services import launch
from apps.clusters.tests.factories import make_roomy_node
from apps.tokens.models import ApiToken
from apps.tokens.services import issue_token
from portal.cache import SharedRedisCache

PERSONAS = ["anonymous", "owner", "other", "read_only", "expired", "revoked", "admin"]
# What each persona gets reading and adding rows of its own (its quota, tokens, SSH keys).
OWN_READ = {
    "anonymous": 401,
    "owner": 200,
    "other": 200,
    "read_only": 200,
    "expired": 401,
    "revoked": 401,
    "admin": 200,
}
OWN_WRITE = {**OWN_READ, "read_only": 403, "owner": 201, "other": 201, "admin": 201}


@pytest.fixture(autouse=True)
def throttle_cache(monkeypatch):
    """A throttle cache of each test's own, in the test Redis as production's is (the throttle's
    script runs there) under a key prefix of the test's own: user and token ids repeat across
    test runs that share Redis, and one test's requests must not count against another's
    budget. Its keys expire with their period."""
    cache = SharedRedisCache(
        settings.CACHES["default"]["LOCATION"], {"KEY_PREFIX": f"throttle-{uuid.uuid4()}"}
    )
    monkeypatch.setattr(SimpleRateThrottle, "cache", cache)
    return cache


@pytest.fixture
def catalog(db):
    catalog_rows()  # load_catalog()'s rows, loaded once per process (issue 28)
    make_roomy_node()  # launches are refused on a pool that could never run them


@pytest.fixture
def demo(catalog):
    from apps.catalog.models import ProductVersion

    return ProductVersion.objects.get(product__name="demo", version="1.0")


def token_for(user, **kwargs) -> str:
    return issue_token(user, kwargs.pop("name", "test"), **kwargs).secret


def bearer(secret: str) -> APIClient:
    """A client that sends this token with every request."""
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {secret}")
    return client


@pytest.fixture
def tokens(alice, bob, admin_user) -> dict[str, str | None]:
    """The secret each persona sends; owner is alice, other is bob."""
    expired = issue_token(alice, "old")
    ApiToken.objects.filter(id=expired.token.id).update(
        expires_at=timezone.now() - timedelta(minutes=1)
    )
    revoked = issue_token(alice, "gone")
    ApiToken.objects.filter(id=revoked.token.id).update(revoked_at=timezone.now())
    return {
        "anonymous": None,
        "owner": token_for(alice),
        "other": token_for(bob),
        "read_only": token_for(alice, read_only=True),
        "expired": expired.secret,
        "revoked": revoked.secret,
        "admin": token_for(admin_user),
    }


@pytest.fixture
def api(tokens):
    """api("owner") -> an APIClient sending that persona's Bearer token."""

    def client(persona: str) -> APIClient:
        c = APIClient()
        if tokens[persona]:
            c.credentials(HTTP_AUTHORIZATION=f"Bearer {tokens[persona]}")
        return c

    return client


@pytest.fixture
def cesga(tokens):
    """cesga("owner") -> a client sending that persona's token as x-auth-token."""

    def client(persona: str) -> APIClient:
        c = APIClient()
        if tokens[persona]:
            c.credentials(HTTP_X_AUTH_TOKEN=tokens[persona])
        return c

    return client


def make_cluster(owner, version, state: str = "queued", **options) -> Cluster:
    """A cluster launched through the services, then put in `state` as a worker would."""
    # Names are unique per owner: unnamed test clusters are c-1, c-2, ...
    name = options.pop("name", None) or free_name(owner.id, "c")
    cluster = launch(owner, version, name, options)
    if state != "queued":
        Cluster.objects.filter(id=cluster.id).update(state=state)
        cluster.refresh_from_db()
    return cluster
