import pytest

from apps.accounts.models import Quota
from apps.clusters.reservation import reserve
from apps.inventory.models import Disk, Node

from .factories import make_cluster, make_network, make_node, wants

pytestmark = pytest.mark.django_db


@pytest.fixture
def placed(alice):
    make_network()
    node = make_node(cores=12, disks={"hdd": 4})
    Quota.objects.create(user=alice, max_cores=20)
    cluster = make_cluster(alice, wants(1, cores=5, disks=3))
    reserve(cluster.id)
    return node, cluster


def test_the_quota_list_shows_usage_next_to_each_limit(client, admin_user, placed):
    client.force_login(admin_user)
    page = client.get("/admin/accounts/quota/").content.decode()
    assert "5 / 20" in page  # cores
    assert "3 / unlimited" in page  # disks


def test_the_node_list_shows_used_and_free_capacity(client, admin_user, placed):
    client.force_login(admin_user)
    page = client.get("/admin/inventory/node/").content.decode()
    assert "5 / 12 (7 free)" in page
    assert "1 / 4" in page  # disks free / total


def test_the_drain_action_stops_new_placements(client, admin_user, placed):
    node, _ = placed
    client.force_login(admin_user)
    client.post("/admin/inventory/node/", {"action": "drain", "_selected_action": [node.id]})
    assert Node.objects.get(id=node.id).state == "draining"


def test_the_disk_list_names_current_holders(client, admin_user, placed):
    _, cluster = placed
    client.force_login(admin_user)
    page = client.get("/admin/inventory/disk/").content.decode()
    assert f"{cluster.name}/worker-0" in page
    free = Disk.objects.filter(state="available").first()
    client.post("/admin/inventory/disk/", {"action": "mark_failed", "_selected_action": [free.id]})
    assert Disk.objects.get(id=free.id).state == "failed"


def test_cluster_pages_are_read_only(client, admin_user, placed):
    _, cluster = placed
    client.force_login(admin_user)
    assert client.get(f"/admin/clusters/cluster/{cluster.id}/change/").status_code == 200
    assert client.get("/admin/clusters/cluster/add/").status_code == 403
