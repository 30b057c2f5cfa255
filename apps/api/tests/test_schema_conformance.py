"""schemathesis over the OpenAPI schema: generated requests to every operation, as a user
and as an admin, must never get a 5xx nor an answer (status, content type, body) the schema
does not describe."""

import pytest
import schemathesis
from django.core.signals import request_finished, request_started
from django.db import close_old_connections
from hypothesis import HealthCheck, settings
from schemathesis.checks import (
    content_type_conformance,
    not_a_server_error,
    response_schema_conformance,
    status_code_conformance,
)

from apps.clusters.reservation import reserve
from apps.clusters.tests.factories import make_network, make_node
from portal.wsgi import application

from .conftest import make_cluster, token_for

schema = schemathesis.openapi.from_wsgi("/api/v1/schema/?format=json", application)
CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance,
          response_schema_conformance]  # fmt: skip


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
def world(in_test_transaction, alice, admin_user, demo):
    """Something to find: a node with disks, a placed cluster and a queued one."""
    make_network()
    make_node(cores=16, memory_mb=16384, disks={"hdd": 6, "ssd": 2})
    reserve(make_cluster(alice, demo, name="placed", size=1).id)
    make_cluster(alice, demo, name="waiting", size=1)
    return {"user": token_for(alice), "admin": token_for(admin_user)}


@pytest.mark.parametrize("persona", ["user", "admin"])
@schema.parametrize()
@settings(
    max_examples=30, deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow,
                           HealthCheck.filter_too_much],
)  # fmt: skip
def test_the_api_keeps_to_its_schema(case, world, persona):
    case.call_and_validate(headers={"Authorization": f"Bearer {world[persona]}"}, checks=CHECKS)
