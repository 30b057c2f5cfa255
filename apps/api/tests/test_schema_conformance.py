"""schemathesis over the whole OpenAPI schema, as a user, a read-only token, anonymous and an
admin: valid and invalid requests to every operation, some with the ids of real rows so the
writing operations really stop, start, destroy, drain and revoke. No answer may be a 5xx; a
read-only token and an anonymous caller never get a write through; valid requests of a user
and an admin get answers (status, content type, body) the schema describes.

Cluster work is not dispatched (DISPATCH_CLUSTER_TASKS is off in tests) and the node is a
row whose Docker endpoint is a stub that knows no container, so a log read is a 409. Each
persona's run counts its requests: in the whole check, at least 1,000 over the user, the
read-only token and anonymous."""

import functools
from collections.abc import Callable

import pytest
import schemathesis
from django.core.signals import request_finished, request_started
from django.db import close_old_connections
from hypothesis import HealthCheck, given, settings
from rest_framework.throttling import SimpleRateThrottle
from schemathesis import GenerationMode
from schemathesis.checks import (
    content_type_conformance,
    not_a_server_error,
    response_schema_conformance,
    status_code_conformance,
)
from schemathesis.core.result import Err

from apps.accounts.models import Quota, SSHKey
from apps.clusters.models import Cluster
from apps.clusters.reservation import reserve
from apps.clusters.tests.factories import make_network, make_node
from apps.inventory.models import Node
from apps.tokens.models import ApiToken
from apps.tokens.services import issue_token
from portal.testing import examples
from portal.wsgi import application

from .conftest import make_cluster
from .docker_stub import docker_stub  # noqa: F401 (a fixture)


@functools.cache
def api_schema():
    """Loaded when first fuzzed, not at import: every xdist process imports this module to
    collect it, and only one runs it."""
    return schemathesis.openapi.from_wsgi("/api/v1/schema/?format=json", application)


CONFORMANCE = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
]
UNSAFE = {"POST", "PUT", "PATCH", "DELETE"}
# Examples per operation and generation mode: 41 operations x 2 modes x 10 = 820 per persona
# in the whole check; 3 in `./platter test --fast` (issue 28: ~70 s a persona at 10).
EXAMPLES = examples(full=10, fast=3)
# Requests each persona must have made; at 10, the user, read-only and anonymous runs make
# >= 1,000.
ENOUGH = 68 * EXAMPLES
ED25519 = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGtQUPSdjnYbC7ejEZ2FEtM0nHXCGgYyc3MzAQplCrRH fuzz"


@pytest.fixture
def in_test_transaction():
    """Keep the WSGI app from closing the test's connection after each request, as Django's
    own test client does, so requests see (and roll back with) the test transaction."""
    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    yield
    request_started.connect(close_old_connections)
    request_finished.connect(close_old_connections)


@pytest.fixture
def unthrottled(monkeypatch):
    """Rates high enough that the fuzzer reaches the views instead of a 429 after 60 calls."""
    monkeypatch.setattr(
        SimpleRateThrottle, "THROTTLE_RATES", {"anon": None, "user": None, "token": None}
    )


@pytest.fixture
def world(in_test_transaction, unthrottled, docker_stub, alice, bob, admin_user, demo):  # noqa: F811
    """Rows to act on: a node with disks, clusters placed, queued and running, a quota, a
    spare token and an SSH key; and each persona's credentials."""
    make_network()
    node = make_node(cores=64, memory_mb=65536, disks={"hdd": 12, "ssd": 4})
    Node.objects.filter(id=node.id).update(endpoint=docker_stub)
    placed = make_cluster(alice, demo, name="placed", size=1)
    reserve(placed.id)
    running = make_cluster(alice, demo, name="running", size=1)
    reserve(running.id)
    Cluster.objects.filter(id=running.id).update(state=Cluster.State.RUNNING)
    queued = make_cluster(alice, demo, name="waiting", size=1)
    quota = Quota.objects.create(user=bob, max_cores=8)
    spare = issue_token(alice, "spare").token
    key = SSHKey.objects.create(user=alice, name="k", public_key=ED25519, fingerprint="SHA256:x")
    tokens = {
        "user": issue_token(alice, "fuzz"),
        "read_only": issue_token(admin_user, "fuzz-ro", read_only=True),
        "admin": issue_token(admin_user, "fuzz"),
    }
    return {
        "node": node,
        "clusters": [placed.id, running.id, queued.id],
        "quota": quota.id,
        "token": spare.id,
        "key": key.id,
        "tokens": tokens,
    }


def real_ids(path: str, world: dict, cluster_id: int) -> dict:
    """Path parameters that name existing rows for `path` (the same names mean different
    rows under different resources)."""
    ids = {
        "username": "alice",
        "product": "demo",
        "version": "1.0",
        "name": "demo",
        "pk": cluster_id,
        "id": cluster_id,
    }
    for prefix, key in (
        ("/api/v1/nodes", "node"),
        ("/api/v1/quotas", "quota"),
        ("/api/v1/tokens", "token"),
        ("/api/v1/ssh-keys", "key"),
    ):
        if path.startswith(prefix):
            ids["id"] = world[key].id if key == "node" else world[key]
    return ids


def fuzz(world: dict, persona: str, after: Callable) -> int:
    """Every operation, valid then invalid input, EXAMPLES each; returns the requests made."""
    made = 0
    issued = world["tokens"].get(persona)
    headers = {"Authorization": f"Bearer {issued.secret}"} if issued else {}
    conforming = persona in ("user", "admin")
    for result in api_schema().get_all_operations():
        if isinstance(result, Err):
            pytest.fail(f"the schema has an operation schemathesis cannot read: {result.err()}")
        operation = result.ok()
        params = {parameter.name for parameter in operation.path_parameters}
        for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):
            fixed = None
            if mode is GenerationMode.POSITIVE and params:  # the ids of real rows
                cluster = world["clusters"][made % len(world["clusters"])]
                ids = real_ids(operation.path, world, cluster)
                fixed = {name: value for name, value in ids.items() if name in params}
            strategy = operation.as_strategy(generation_mode=mode, path_parameters=fixed)
            checks = CONFORMANCE if conforming and mode.is_positive else [not_a_server_error]
            made += run(strategy, headers, checks, after, issued.token if issued else None)
    return made


def run(strategy, headers: dict, checks: list, after: Callable, token: ApiToken | None) -> int:
    """EXAMPLES cases of one operation; returns how many were sent."""
    sent = 0

    @given(case=strategy)
    @settings(
        max_examples=EXAMPLES,
        deadline=None,
        database=None,
        suppress_health_check=[
            HealthCheck.function_scoped_fixture,
            HealthCheck.too_slow,
            HealthCheck.filter_too_much,
        ],
    )
    def one(case) -> None:
        nonlocal sent
        sent += 1
        if token:  # a DELETE /tokens/{id} the fuzzer aimed at its own token
            ApiToken.objects.filter(id=token.id).update(revoked_at=None)
        after(case, case.call_and_validate(headers=headers, checks=checks))

    one()
    return sent


def no_write_gets_through(case, response) -> None:
    if case.method.upper() in UNSAFE:
        assert not 200 <= response.status_code < 300, (case.method, case.formatted_path)


def nothing_without_credentials(case, response) -> None:
    assert not 200 <= response.status_code < 300, (case.method, case.formatted_path)


def anything(case, response) -> None:
    pass


@pytest.mark.parametrize(
    ("persona", "after"),
    [
        ("user", anything),
        ("read_only", no_write_gets_through),
        ("anonymous", nothing_without_credentials),
        ("admin", anything),
    ],
)
def test_no_generated_request_gets_a_server_error(world, persona, after):
    made = fuzz(world, persona, after)
    print(f"schemathesis: {made} requests as {persona}")
    assert made >= ENOUGH
