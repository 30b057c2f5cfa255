"""`platter allow` and `platter launch --allow`, run as a user runs them against the live test
server: who may connect to a cluster's ports."""

import pytest

from apps.clusters.models import Cluster, ClusterEvent
from apps.clusters.tests.factories import make_network, make_node

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def pool(transactional_db):
    """A node with room for the demo's launches (a launch on an empty pool is refused)."""
    make_network()
    return make_node(cores=8, memory_mb=8192, disks={"hdd": 6})


@pytest.fixture
def cluster(alice, catalog_loaded) -> Cluster:
    from apps.usage.tests.test_usage import live

    return live(alice, cores=1, disks=1)


def test_launch_takes_repeated_allows(logged_in, alice):
    ran = logged_in(
        "launch", "demo", "1.0", "--size", "1", "--allow", "192.0.2.7", "--allow", "10.8.0.0/16"
    )
    assert ran.returncode == 0, ran
    assert Cluster.objects.get(owner=alice).allowed_sources == ["10.8.0.0/16", "192.0.2.7/32"]


def test_launch_with_a_bad_allow_is_refused_naming_the_flag_and_the_entry(logged_in, alice):
    ran = logged_in(
        "launch", "demo", "1.0", "--size", "1", "--allow", "10.0.0.0/8", "--allow", "me"
    )
    assert ran.returncode == 1, ran
    assert "--allow (allowed_sources): 'me' is not an IPv4 address or CIDR" in ran.stderr
    as_json = logged_in("launch", "demo", "1.0", "--allow", "::1", "--json").json()
    assert as_json["exit_code"] == 1 and "is IPv6" in as_json["fields"]["allowed_sources"]
    assert not Cluster.objects.filter(owner=alice).exists()


def test_allow_shows_sets_and_clears_the_list(logged_in, cluster):
    shown = logged_in("allow", str(cluster.id))
    assert shown.returncode == 0, shown
    assert "Allowed sources: nobody else" in shown.stdout
    assert "SSH (22) answers everyone with your keys" in shown.stdout

    set_it = logged_in("allow", cluster.name, "198.51.100.0/24", "10.1.2.3")
    assert set_it.returncode == 0, set_it
    assert "Allowed sources: 10.1.2.3/32, 198.51.100.0/24" in set_it.stdout
    assert Cluster.objects.get(id=cluster.id).allowed_sources == ["10.1.2.3/32", "198.51.100.0/24"]
    assert ClusterEvent.objects.filter(
        cluster=cluster, message__contains="allowed sources set to 10.1.2.3/32, 198.51.100.0/24"
    ).exists()
    as_json = logged_in("allow", str(cluster.id), "--json").json()
    assert as_json == {"allowed_sources": ["10.1.2.3/32", "198.51.100.0/24"], "site_sources": []}

    cleared = logged_in("allow", str(cluster.id), "--none", "--json")
    assert cleared.returncode == 0, cleared
    assert cleared.json()["allowed_sources"] == []
    assert Cluster.objects.get(id=cluster.id).allowed_sources == []


def test_allow_refusals_name_why(logged_in, cluster, bob):
    bad = logged_in("allow", str(cluster.id), "10.0.0.0/8", "lab-host")
    assert bad.returncode == 1
    assert "CIDR (allowed_sources): 'lab-host' is not an IPv4 address or CIDR" in bad.stderr
    both = logged_in("allow", str(cluster.id), "10.0.0.0/8", "--none")
    assert both.returncode == 2 and "give CIDRs or --none, not both" in both.stderr
    Cluster.objects.filter(id=cluster.id).update(state=Cluster.State.DESTROYED)
    gone = logged_in("allow", str(cluster.id), "10.0.0.0/8")
    assert gone.returncode == 1 and "the cluster is destroyed" in gone.stderr
    assert Cluster.objects.get(id=cluster.id).allowed_sources == []
