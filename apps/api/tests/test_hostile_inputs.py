"""Hostile values in every place the API reads input, one place at a time: each path and query
parameter and each body field of every operation of the OpenAPI schema, the product options of
a launch (free-form, so the schema cannot describe them to a fuzzer) and the CESGA surface
(not in the schema). NUL bytes, 5,000-digit numbers, nan, infinities, wrong types: the answer is
a 4xx, never a 5xx. Each 5xx this found is fixed and stays here as a regression case. Under
`./platter test --fast` each place gets a third of the values (portal.testing.spread); the
whole check and CI send every value to every place."""

import re
from urllib.parse import quote, urlencode

import pytest
from django.test import Client
from drf_spectacular.generators import SchemaGenerator

from apps.clusters.models import Cluster
from apps.clusters.reservation import reserve
from apps.clusters.tests.factories import make_network, make_node
from apps.inventory.models import Node
from portal.testing import spread

from .conftest import make_cluster, token_for
from .docker_stub import docker_stub  # noqa: F401 (a fixture)

DIGITS = "9" * 5000
TEXT = [
    "\x00",
    "a\x00b",
    DIGITS,
    "-" + DIGITS,
    "nan",
    "inf",
    "-inf",
    "1e400",
    "",
    " ",
    "é😀",
    "%00",
    "../../etc/passwd",
    "0x10",
    "1_000",
    "-1",
    "0",
    "9" * 30,
]
VALUES = [
    *TEXT,
    None,
    True,
    [],
    {},
    [DIGITS],
    {"a": "\x00"},
    2**70,
    -(2**70),
    1e308,
    -0.0,
    0.5,
    10**4299,
]
# A launch's product options are any other key of the body (apps.catalog.options).
OPTIONS = ["size", "cpu", "mem", "disks", "disk_kind", "workers", "replication"]
CESGA = "/bigdata/api/v1"


def operations() -> list[tuple[str, str, dict]]:
    """(method, path template, operation) of every operation of the schema, body properties
    resolved from their components."""
    document = SchemaGenerator().get_schema(request=None, public=True)
    components = document["components"]["schemas"]
    found = []
    for path, methods in document["paths"].items():
        for method, operation in methods.items():
            body = (operation.get("requestBody") or {}).get("content", {})
            ref = (body.get("application/json") or {}).get("schema", {}).get("$ref", "")
            properties = components[ref.rsplit("/", 1)[1]]["properties"] if ref else {}
            found.append((method, path, {**operation, "body_fields": sorted(properties)}))
    return sorted(found, key=lambda item: (item[1], item[0]))


OPERATIONS = operations()


@pytest.fixture
def raw():
    return Client(raise_request_exception=False)


@pytest.fixture
def world(alice, admin_user, demo, docker_stub):  # noqa: F811
    make_network()
    node = make_node(cores=64, memory_mb=65536, disks={"hdd": 12, "ssd": 4})
    Node.objects.filter(id=node.id).update(endpoint=docker_stub)
    running = make_cluster(alice, demo, name="running", size=1)
    reserve(running.id)
    Cluster.objects.filter(id=running.id).update(state=Cluster.State.RUNNING)
    return {
        "node": node.id,
        "cluster": running.id,
        "auth": {"HTTP_AUTHORIZATION": f"Bearer {token_for(admin_user)}"},
        "cesga": {"HTTP_X_AUTH_TOKEN": token_for(alice)},
    }


def no_server_error(response, what: str) -> None:
    assert response.status_code < 500, (what, response.status_code, response.content[:300])


def send(raw, method: str, url: str, body, headers: dict):
    return getattr(raw, method)(url, body, content_type="application/json", **headers)


@pytest.mark.parametrize(
    ("method", "path", "operation"), OPERATIONS, ids=[f"{m} {p}" for m, p, _ in OPERATIONS]
)
def test_no_hostile_value_gets_a_server_error(raw, world, method, path, operation):
    ids = {
        "id": world["cluster"],
        "cluster_id": world["cluster"],
        "pk": world["cluster"],
        "username": "alice",
        "product": "demo",
        "version": "1.0",
        "name": "demo",
    }
    if path.startswith("/api/v1/nodes/"):
        ids["id"] = world["node"]
    params = operation.get("parameters", [])
    in_path = [p["name"] for p in params if p["in"] == "path"]
    in_query = [p["name"] for p in params if p["in"] == "query"]
    fields = operation["body_fields"] + (
        OPTIONS if "launch" in operation["operationId"] or path == "/api/v1/clusters" else []
    )
    base = {"product": "demo", "version": "1.0"} if path == "/api/v1/clusters" else {}

    def url(values: dict, query: dict | None = None) -> str:
        filled = re.sub(r"\{(\w+)\}", lambda m: quote(str(values[m.group(1)]), safe=""), path)
        return filled + ("?" + urlencode(query) if query else "")

    sent = 0
    for name in in_path:
        for value in spread(TEXT, f"{method} {path} {name}"):
            response = send(raw, method, url({**ids, name: value}), {}, world["auth"])
            no_server_error(response, f"{method} {path} {name}={value[:20]!r}")
            sent += 1
    for name in in_query:
        for value in spread(TEXT, f"{method} {path} ?{name}"):
            response = send(raw, method, url(ids, {name: value}), None, world["auth"])
            no_server_error(response, f"{method} {path} ?{name}={value[:20]!r}")
            sent += 1
    if method in ("post", "put", "patch"):
        for name in fields:
            for value in spread(VALUES, f"{method} {path} {name}="):
                response = send(raw, method, url(ids), {**base, name: value}, world["auth"])
                no_server_error(response, f"{method} {path} {name}={str(value)[:20]!r}")
                sent += 1
    assert sent or not (in_path or in_query or fields)


CESGA_READS = [
    "/products/{x}",
    "/products/demo/{x}",
    "/products/{x}/1.0/options",
    "/queue/{x}",
    "/clusters/{x}",
    "/clusters/alice/{x}",
    "/clusters/alice/demo/{x}",
    "/clusters/alice/demo/1.0/{x}",
    "/clusters/{x}/demo/1.0/{id}/nodes",
    "/clusters/alice/demo/1.0/{id}/services",
]


@pytest.mark.parametrize("path", CESGA_READS)
def test_no_hostile_value_in_a_cesga_path_gets_a_server_error(raw, world, path):
    for value in spread(TEXT, path):
        filled = path.format(x=quote(value, safe=""), id=world["cluster"])
        no_server_error(raw.get(CESGA + filled, **world["cesga"]), f"{path} x={value[:20]!r}")
        no_server_error(raw.get(CESGA + filled), f"anonymous {path} x={value[:20]!r}")


def test_no_hostile_option_in_a_cesga_launch_gets_a_server_error(raw, world):
    for name in [*OPTIONS, "name", "lease", "reuse_data_from"]:
        for value in spread(VALUES, f"cesga launch {name}"):
            response = send(
                raw, "post", f"{CESGA}/products/demo/1.0", {name: value}, world["cesga"]
            )
            no_server_error(response, f"cesga launch {name}={str(value)[:20]!r}")
