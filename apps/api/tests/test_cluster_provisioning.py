"""The API detail and the cluster page show how long the launch took, phase by phase."""

import pytest

from apps.clusters.reservation import reserve
from apps.clusters.tests.factories import make_network, make_node
from apps.clusters.transitions import transition

from .conftest import make_cluster

pytestmark = pytest.mark.django_db


def test_a_launch_shows_its_seconds_and_phases_until_and_once_running(api, alice, demo, client):
    make_network()
    make_node(cores=16, memory_mb=16384)
    cluster = make_cluster(alice, demo, name="timed", size=1)
    going = api("owner").get(f"/api/v1/clusters/{cluster.id}").json()["provisioning"]
    assert going["running"] is False and set(going["phases"]) == {
        "queued",
        "placing",
        "configuring",
    }

    reserve(cluster.id)
    transition(cluster.id, "placing", "configuring")
    transition(cluster.id, "configuring", "running")
    done = api("owner").get(f"/api/v1/clusters/{cluster.id}").json()["provisioning"]
    assert done["running"] is True
    assert done["seconds"] == pytest.approx(sum(done["phases"].values()), abs=0.15)

    client.force_login(alice)
    page = client.get(f"/clusters/{cluster.id}/").content.decode()
    assert "Ready in <strong>" in page and "configuring" in page


def test_the_data_path_lists_the_held_disks_and_settings_in_the_api_and_on_the_page(
    api, alice, demo, client
):
    make_network()
    make_node(cores=16, memory_mb=16384)
    cluster = make_cluster(alice, demo, name="disks", size=1)
    assert api("owner").get(f"/api/v1/clusters/{cluster.id}").json()["data_path"] == []
    reserve(cluster.id)
    paths = api("owner").get(f"/api/v1/clusters/{cluster.id}").json()["data_path"]
    assert sorted(p["hostname"] for p in paths) == ["master-0", "worker-0"]
    for path in paths:
        assert [d["path"] for d in path["disks"]] == ["/data/1"]
        assert path["disks"][0]["kind"] == "hdd" and path["disks"][0]["seq_read_mbps"] is None
        assert path["settings"] == {"web root": "/data/1/www"}

    client.force_login(alice)
    page = client.get(f"/clusters/{cluster.id}/").content.decode()
    assert 'id="h-data-path"' in page and "not measured yet" in page
    assert "held by this cluster alone" in page
