"""Callers of every kind (API tokens, browser sessions, the admin) coming from known
addresses, and a helper that finds the one audit row an action should have written."""

import uuid

import pytest
from django.core.cache.backends.locmem import LocMemCache
from rest_framework.test import APIClient
from rest_framework.throttling import SimpleRateThrottle

from apps.audit.models import AuditEvent
from apps.catalog.models import ProductVersion
from apps.catalog.services import load_catalog
from apps.clusters.models import Cluster
from apps.clusters.services import launch
from apps.clusters.tests.factories import make_roomy_node
from apps.tokens.services import issue_token

USER_ADDRESS = "203.0.113.7"  # TEST-NET-3: documentation addresses, never a real client
ADMIN_ADDRESS = "2001:db8::5"


@pytest.fixture(autouse=True)
def throttle_cache(monkeypatch):
    """A throttle cache of each test's own, so runs sharing Redis never throttle each other."""
    monkeypatch.setattr(SimpleRateThrottle, "cache", LocMemCache(f"t-{uuid.uuid4()}", {}))


@pytest.fixture
def demo(db) -> ProductVersion:
    load_catalog()
    make_roomy_node()  # launches are refused on a pool that could never run them
    return ProductVersion.objects.get(product__name="demo", version="1.0")


def bearer(user, address: str = USER_ADDRESS) -> APIClient:
    """An API client sending a fresh token of `user` from `address`."""
    client = APIClient(REMOTE_ADDR=address)
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {issue_token(user, 'audit-test').secret}")
    return client


def cesga_client(user, address: str = USER_ADDRESS) -> APIClient:
    """A client of the CESGA surface, which sends its token as x-auth-token."""
    client = APIClient(REMOTE_ADDR=address)
    client.credentials(HTTP_X_AUTH_TOKEN=issue_token(user, "cesga-test").secret)
    return client


@pytest.fixture
def as_alice(client, alice):
    """A browser session of alice's, from USER_ADDRESS."""
    client.force_login(alice)
    client.defaults["REMOTE_ADDR"] = USER_ADDRESS
    return client


@pytest.fixture
def as_admin(client, admin_user):
    client.force_login(admin_user)
    client.defaults["REMOTE_ADDR"] = ADMIN_ADDRESS
    return client


def make_cluster(
    owner,
    version: ProductVersion,
    state: str = "queued",
    name: str = "c",
    lease_hours: float | None = None,
    **options,
) -> Cluster:
    """A cluster launched through the services (its launch row written), then put in
    `state` as a worker would."""
    cluster = launch(owner, version, name, options, lease_hours)
    Cluster.objects.filter(id=cluster.id).update(state=state)
    cluster.refresh_from_db()
    return cluster


def only_event(action: str, **lookups) -> AuditEvent:
    """The single audit row of `action` matching `lookups`; fails if there are none or two."""
    rows = list(AuditEvent.objects.filter(action=action, **lookups))
    assert len(rows) == 1, f"{len(rows)} {action} rows: {rows}"
    return rows[0]


def events_of(obj) -> list[str]:
    """The actions recorded about one object, oldest first."""
    rows = AuditEvent.objects.filter(object_type=obj._meta.label_lower, object_id=obj.pk)
    return list(rows.order_by("time", "id").values_list("action", flat=True))
