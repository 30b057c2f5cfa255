"""A product registered with CESGA's four calls runs on the real lab, driven by a real worker:
launched with CESGA's launch call and with the services API, its instances hold their own
disks at /data/K (or where its template puts them), and both delete calls take it down."""

import pytest
from rest_framework.test import APIClient

from apps import nodes
from apps.clusters.models import Cluster
from apps.clusters.tests.waiting import wait_for

from .cesga_product import BASE, register

pytestmark = pytest.mark.django_db(transaction=True)
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


# In the shape of CESGA's own Cassandra registration: `size` nodes named cassandranodeN, each
# with `disks` disks whose template numbers them from 0 (disk0 at /data/0, ...). The lab's base
# image and a sleep loop stand in for CESGA's Cassandra image: what is tested is where the disks go.
CASSANDRA_SHAPED = """{% set comma = joiner(",") %}
{
  "dnsname": "{{ clusterid }}",
  "nodes": {
    {% for n in range(0, opts['size']) %}
    {{ comma() }} "cassandranode{{ n }}": {
      "docker_image": "platter/lab-base:1",
      "cpu": {{ opts['cpu'] }}, "mem": {{ opts['mem'] }},
      "disks": { {% set c = joiner(",") %}{% for k in range(0, opts['disks']) %}
        {{ c() }} "disk{{ k }}": {"destination": "DESTINATION"}{% endfor %}
      },
      "networks": {"eth0": {"type": "dynamic", "networkname": "storage"}},
      "command": "LOOP"
    }
    {% endfor %}
  },
  "services": {"seeds": {"nodes": ["cassandranode0"]}}
}
"""
CASSANDRA_OPTIONS = {
    "required": {"size": 3},
    "optional": {"disks": 1},
    "advanced": {"cpu": 1, "mem": 64},
    "descriptions": {
        "size": "Number of nodes",
        "disks": "Disks per node",
        "cpu": "CPUs per node",
        "mem": "Memory per node (MB)",
    },
}


@pytest.mark.parametrize(
    "destination, disks, wanted",
    [
        ("/data/{{ k }}", 2, ["/data/0", "/data/1"]),
        ("/srv/db", 1, ["/srv/db"]),
    ],
)
def test_a_registered_product_gets_its_disks_exactly_where_its_template_puts_them(
    dispatching, lab_cleanup, cesga, alice, destination, disks, wanted
):
    from .cesga_product import LOOP

    template = CASSANDRA_SHAPED.replace("DESTINATION", destination).replace(
        "LOOP", LOOP.replace("'", "\\u0027")
    )
    answers = register(cesga("admin"), "cassandra", "3.0.8", template, CASSANDRA_OPTIONS)
    assert [a.status_code for a in answers] == [201, 200, 200, 200], answers[2].content

    owner = cesga("owner")
    launched = owner.post(
        f"{BASE}/products/cassandra/3.0.8", {"size": 2, "disks": disks}, format="json"
    )
    assert launched.status_code == 202, launched.content
    cluster = Cluster.objects.get(owner=alice, version__product__name="cassandra")
    cluster = wait_for(cluster.id, S.RUNNING)

    instances = list(cluster.instances.select_related("node").order_by("index"))
    assert len(instances) == 2
    sources = []
    for instance in instances:
        seen = mounts(instance)  # the container's own mount table
        assert sorted(seen) == wanted, seen
        sources += [(instance.node.name, seen[path]) for path in wanted]
    assert len(set(sources)) == 2 * disks  # dedicated disks, none shared

    # The data path and the CESGA node list say the same.
    api = APIClient()
    api.force_authenticate(alice)
    detail = api.get(f"/api/v1/clusters/{cluster.id}")
    assert detail.status_code == 200, detail.content
    body = detail.json()
    assert [[d["path"] for d in i["disks"]] for i in body["data_path"]] == [wanted, wanted]
    assert [[d["destination"] for d in i["disks"]] for i in body["instances"]] == [wanted] * 2
    listed = owner.get(f"{BASE}/clusters/alice/cassandra/3.0.8/{cluster.id}/nodes").json()
    assert [[d["destination"] for d in n["disks"]] for n in listed["nodes"]] == [wanted] * 2
    assert all(d["origin"] is None for n in listed["nodes"] for d in n["disks"])  # staff only

    assert owner.delete(f"{BASE}/clusters/alice/cassandra/3.0.8/{cluster.id}").status_code == 200
    wait_for(cluster.id, S.DESTROYED)
