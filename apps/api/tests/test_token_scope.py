"""A read-only token only reads, whoever holds it and whatever the view's own permissions say:
a staff member's read-only token may not drain nodes or change quotas either."""

import re

import pytest
from django.urls import reverse
from drf_spectacular.generators import SchemaGenerator

from apps.accounts.models import Quota
from apps.clusters.tests.factories import make_network, make_node
from apps.inventory.models import Node

from .conftest import make_cluster, token_for

UNSAFE = ("post", "put", "patch", "delete")


def unsafe_operations() -> list[tuple[str, str]]:
    """Every writing operation the OpenAPI schema documents, as (method, path template)."""
    paths = SchemaGenerator().get_schema(request=None, public=True)["paths"]
    return sorted((m, p) for p, ops in paths.items() for m in ops if m in UNSAFE)


@pytest.fixture
def staff_read_only(admin_user):
    return token_for(admin_user, read_only=True)


@pytest.fixture
def world(alice, demo):
    make_network()
    node = make_node(cores=8, memory_mb=8192, disks={"hdd": 3})
    quota = Quota.objects.create(user=alice, max_cores=4)
    cluster = make_cluster(alice, demo, name="web", size=1)
    return {"node": node, "quota": quota, "cluster": cluster}


def test_the_schema_documents_writing_operations():
    assert len(unsafe_operations()) >= 15


@pytest.mark.parametrize(("method", "path"), unsafe_operations())
def test_a_staff_read_only_token_writes_nowhere(client, world, staff_read_only, method, path):
    ids = {
        "id": world["cluster"].id,
        "cluster_id": world["cluster"].id,
        "pk": world["cluster"].id,
        "username": "alice",
        "product": "demo",
        "version": "1.0",
    }
    if path.startswith("/api/v1/nodes"):
        ids["id"] = world["node"].id
    elif path.startswith("/api/v1/quotas"):
        ids["id"] = world["quota"].id
    url = re.sub(r"\{(\w+)\}", lambda m: str(ids[m.group(1)]), path)
    response = getattr(client, method)(
        url, {}, content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {staff_read_only}"
    )
    assert response.status_code == 403, (url, response.content)
    assert response.json()["error"] == "read_only_token"


def test_a_staff_read_only_token_neither_drains_nor_sets_quotas(client, world, staff_read_only):
    auth = {"HTTP_AUTHORIZATION": f"Bearer {staff_read_only}"}
    node, quota = world["node"], world["quota"]
    assert client.post(f"/api/v1/nodes/{node.id}/drain", **auth).status_code == 403
    response = client.patch(
        f"/api/v1/quotas/{quota.id}", {"max_cores": 99}, content_type="application/json", **auth
    )
    assert response.status_code == 403
    assert client.delete(f"/api/v1/quotas/{quota.id}", **auth).status_code == 403
    assert Node.objects.get(id=node.id).state == Node.State.ACTIVE
    assert Quota.objects.get(id=quota.id).max_cores == 4
    # ...while it still reads the pool, as staff.
    assert client.get(f"/api/v1/nodes/{node.id}", **auth).status_code == 200


def test_a_read_only_token_neither_launches_nor_deletes_on_the_cesga_surface(client, world, alice):
    auth = {"HTTP_X_AUTH_TOKEN": token_for(alice, read_only=True)}
    launch = client.post(
        "/bigdata/api/v1/products/demo/1.0", {}, content_type="application/json", **auth
    )
    cluster = world["cluster"]
    delete = client.delete(f"/bigdata/api/v1/clusters/alice/demo/1.0/{cluster.id}", **auth)
    assert (launch.status_code, delete.status_code) == (403, 403)
    assert client.get(reverse("cesga:clusters"), **auth).status_code == 200
