"""A product registered with CESGA's four calls runs on the real lab, driven by a real worker:
launched with CESGA's launch call and with the services API, its instances hold their own
disks at /data/K, and both delete calls take it down."""

import pytest

from apps import nodes
from apps.clusters.models import Cluster
from apps.clusters.tests.waiting import wait_for

from .cesga_product import BASE, register

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.lab]
S = Cluster.State


def container(instance) -> dict:
    found = nodes.client(instance.node).inspect(instance.container_id)
    assert found is not None, f"{instance.hostname} has no container"
    return found


def mounts(instance) -> dict[str, str]:
    """Where in the container -> where on the node, for the instance's bind mounts."""
    return {m["Destination"]: m["Source"] for m in container(instance)["Mounts"]}


def test_a_registered_product_launches_with_size_2_and_each_worker_has_its_disks(
    dispatching, lab_cleanup, cesga, alice
):
    assert [a.status_code for a in register(cesga("admin"))] == [201, 200, 200, 200]

    launched = cesga("owner").post(f"{BASE}/products/tiny/1.0", {"size": 2}, format="json")
    assert launched.status_code == 202, launched.content
    cluster = Cluster.objects.get(owner=alice, version__product__name="tiny")
    cluster = wait_for(cluster.id, S.RUNNING)

    instances = list(cluster.instances.select_related("node").order_by("role", "index"))
    assert [(i.role, i.disks) for i in instances] == [("master", 1), ("worker", 2), ("worker", 2)]
    sources = []
    for instance in instances:
        seen = mounts(instance)
        wanted = [f"/data/{k}" for k in range(1, instance.disks + 1)]
        assert sorted(seen) == wanted, seen
        sources += [(instance.node.name, seen[path]) for path in wanted]
        env = container(instance)["Config"]["Env"]
        assert f"ROLE={instance.role}" in env
        assert container(instance)["State"]["Running"] is True
        assert container(instance)["HostConfig"]["Privileged"] is False
    assert len(set(sources)) == 5  # five dedicated disks, none shared

    status = cesga("owner").get(f"{BASE}/clusters/alice/tiny/1.0/{cluster.id}").json()
    assert status["data"]["status"] == "ready"
    deleted = cesga("owner").delete(f"{BASE}/clusters/alice/tiny/1.0/{cluster.id}")
    assert deleted.status_code == 200
    wait_for(cluster.id, S.DESTROYED)
    assert all(nodes.client(i.node).inspect(i.container_id) is None for i in instances)


def test_the_services_api_lists_launches_and_deletes_on_the_lab(
    dispatching, lab_cleanup, cesga, alice
):
    register(cesga("admin"))
    user = cesga("owner")
    assert "tiny" in user.get(f"{BASE}/services").json()["services"]
    assert user.get(f"{BASE}/services/tiny/1.0").json()["options"]["required"] == {"size": 2}

    launched = user.post(f"{BASE}/services/tiny/1.0", {"size": 1, "disks": 1}, format="json")
    assert launched.status_code == 201, launched.content
    ident = int(launched.json().rsplit("/", 1)[1])
    cluster = wait_for(ident, S.RUNNING)
    assert sorted(mounts(cluster.instances.get(role="worker"))) == ["/data/1"]

    listed = user.get(f"{BASE}/instances/alice/tiny/1.0").json()["instances"]
    assert [(i["data"]["dn"], i["data"]["status"]) for i in listed] == [
        (f"instances/alice/tiny/1.0/{ident}", "ready")
    ]
    assert cesga("other").get(f"{BASE}/instances/alice/tiny/1.0").json()["instances"] == []

    deleted = user.delete(f"{BASE}/services?type=multi&name=tiny&id={ident}")
    assert deleted.status_code == 200 and deleted.json() == {"result": "success"}
    wait_for(ident, S.DESTROYED)
    listed = user.get(f"{BASE}/instances/alice/tiny/1.0").json()["instances"]
    assert [i["data"]["status"] for i in listed] == ["destroyed"]
