"""End to end against the real lab: a script with a token launches a demo cluster over HTTP,
polls it to running, reads its instances and disks, destroys it and sees the disks free."""

import time

import pytest
import requests

from apps.catalog.services import load_catalog
from apps.clusters.tests.waiting import wait_for
from apps.inventory.models import Disk

from .conftest import token_for

pytestmark = pytest.mark.django_db(transaction=True)


def poll(http: requests.Session, url: str, *states: str, seconds: float = 120) -> dict:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        body = http.get(url, timeout=10).json()
        if body["state"] in states:
            return body
        time.sleep(0.5)
    events = "\n".join(f"{e['at']} {e['level']}: {e['message']}" for e in body["events"])
    pytest.fail(f"{url} is {body['state']}, not {states}; reason {body['reason']!r}\n{events}")


def test_a_token_launches_reads_and_destroys_a_lab_cluster(
    dispatching, lab_cleanup, live_server, alice, admin_user
):
    load_catalog()
    user, admin = requests.Session(), requests.Session()
    user.headers["Authorization"] = f"Bearer {token_for(alice)}"
    admin.headers["Authorization"] = f"Bearer {token_for(admin_user)}"
    api = f"{live_server.url}/api/v1"

    launched = user.post(
        f"{api}/products/demo/1.0", json={"size": 2, "disks": 2, "name": "e2e"}, timeout=30
    )
    assert launched.status_code == 202, launched.text
    url = launched.headers["Location"]

    running = poll(user, url, "running", "failed")
    assert running["state"] == "running", running["reason"]
    assert [i["hostname"] for i in running["instances"]] == ["master-0", "worker-0", "worker-1"]
    held = []
    for instance in running["instances"]:
        assert instance["node"] and instance["address"] and instance["container_id"]
        assert instance["container_state"] == "running"
        assert len(instance["disks"]) == 2
        assert {d["node"] for d in instance["disks"]} == {instance["node"]}
        assert [d["destination"] for d in instance["disks"]] == ["/data/1", "/data/2"]
        assert not any("host_path" in d or "device" in d for d in instance["disks"])
    # Where a disk sits on its node is for staff only.
    for instance in admin.get(url, timeout=10).json()["instances"]:
        held += [(d["node"], d["host_path"]) for d in instance["disks"]]
    assert len(set(held)) == 6  # six whole disks, none shared
    endpoint = running["endpoints"][0]
    assert endpoint["url"] == f"http://{running['instances'][0]['address']}:80"

    disks = admin.get(f"{api}/disks?state=allocated&page_size=500", timeout=10).json()["results"]
    holders = {
        (d["node"], d["mount_path"])
        for d in disks
        if d["holder"] and d["holder"]["cluster"] == running["id"]
    }
    assert holders == set(held)

    destroyed = user.delete(f"{url}?keep_data=false", timeout=30)
    assert destroyed.status_code == 202 and destroyed.json()["state"] == "destroying"
    poll(user, url, "destroyed")

    after = admin.get(f"{api}/disks?page_size=500", timeout=10).json()["results"]
    freed = {(d["node"], d["mount_path"]): d for d in after if (d["node"], d["mount_path"]) in held}
    assert len(freed) == 6
    assert all(d["holder"] is None and d["state"] == Disk.State.AVAILABLE for d in freed.values())
    assert all(d["keeps_data_of"] is None for d in freed.values())  # wiped, as asked

    # Usage read from the life the worker really drove: cores while the containers existed,
    # six disks from reservation to release; nothing before the launch or after the destroy.
    from apps.clusters.models import Cluster

    cluster = Cluster.objects.get(id=running["id"])
    today = cluster.created.date().isoformat()
    usage = user.get(
        f"{api}/usage", params={"from": today, "to": today, "group_by": "cluster"}, timeout=10
    ).json()
    (mine,) = [t for t in usage["totals"] if t["key"].endswith(f"#{cluster.id}")]
    lived = (cluster.destroyed_at - cluster.created).total_seconds() / 3600
    cores = sum(i["cores"] for i in running["instances"])
    assert 0 < mine["core_h"] <= cores * lived
    assert 0 < mine["hdd_h"] + mine["ssd_h"] <= 6 * lived


def test_a_launch_beyond_free_capacity_waits_queued_with_the_reason(
    dispatching, lab_cleanup, live_server, alice
):
    load_catalog()
    user = requests.Session()
    user.headers["Authorization"] = f"Bearer {token_for(alice)}"
    # 9 instances x 4 HDDs: within alice's quota, more than the lab has at all: refused.
    never = user.post(
        f"{live_server.url}/api/v1/products/demo/1.0", json={"size": 8, "disks": 4}, timeout=30
    )
    assert never.status_code == 409 and never.json()["error"] == "never_fits"
    # A first cluster holds an HDD on two nodes; 4 instances x 4 HDDs need four whole nodes.
    first = user.post(
        f"{live_server.url}/api/v1/products/demo/1.0", json={"size": 1, "disks": 1}, timeout=30
    )
    wait_for(first.json()["id"], "running")
    launched = user.post(
        f"{live_server.url}/api/v1/products/demo/1.0", json={"size": 3, "disks": 4}, timeout=30
    )
    assert launched.status_code == 202 and launched.json()["state"] == "queued"
    url = launched.headers["Location"]
    deadline = time.monotonic() + 60
    while not (body := user.get(url, timeout=10).json())["reason"]:
        assert time.monotonic() < deadline, "the worker never tried to place the cluster"
        time.sleep(0.3)
    assert body["state"] == "queued"
    assert "disk" in body["reason"].lower()
    assert user.delete(url, timeout=30).json()["state"] == "destroyed"  # cancelled while queued
