import pytest

from apps.clusters.models import Cluster

from .factories import make_cluster, make_network, make_node, wants

pytestmark = pytest.mark.django_db


def test_force_destroy_destroys_the_selected_clusters(client, admin_user, alice):
    make_network()
    make_node()
    cluster = make_cluster(alice, wants(1))
    client.force_login(admin_user)
    response = client.post(
        "/admin/clusters/cluster/", {"action": "force_destroy", "_selected_action": [cluster.id]}
    )
    assert response.status_code == 302
    assert Cluster.objects.get(id=cluster.id).state == Cluster.State.DESTROYED
