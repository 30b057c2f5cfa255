"""The perimeter's rules and when the nodes get them, above the node boundary (apps.nodes.fake):
a cluster's ports answer its members, the portal, the site's ranges and its owner's sources,
SSH everyone; the rules are on a node before any container of the cluster starts there, leave
with the cluster, follow an owner's change and come back to a node that lost them. The same on
the real lab, with real connections: workers/tests/test_isolation.py."""

import pytest
from django.core.cache import cache
from django.core.management import call_command

from apps.catalog.models import ProductVersion
from apps.clusters import perimeter as rules
from apps.clusters import services
from apps.clusters.models import Cluster, ClusterEvent
from apps.clusters.reservation import reserve
from apps.clusters.tests.factories import make_network, make_node
from workers import operations, perimeter, reconciler

pytestmark = pytest.mark.django_db(transaction=True)
S = Cluster.State


@pytest.fixture
def pool():
    """As conftest.py's, on a network with a portal address and a parent."""
    network = make_network()
    network.portal_source, network.parent = "10.9.255.253", "eth1"
    network.save()
    return [make_node(disks={"ssd": 4}) for _ in range(2)]


@pytest.fixture
def demo():
    call_command("load_catalog", verbosity=0)
    return ProductVersion.objects.get(product__name="demo")


@pytest.fixture(autouse=True)
def forget_loaded_rules():
    cache.clear()  # what each node was last given (workers.perimeter)
    yield
    cache.clear()


def placed(owner, version, size: int = 2, allowed: list[str] | None = None) -> Cluster:
    wants = [services.InstanceWant("master", i, 1, 256, 1, "ssd") for i in range(size)]
    cluster = services.create_cluster(owner, version, f"c{Cluster.objects.count()}", wants)
    if allowed is not None:
        Cluster.objects.filter(id=cluster.id).update(allowed_sources=allowed)
    reserve(cluster.id)
    return Cluster.objects.get(id=cluster.id)


def addresses(cluster: Cluster) -> list[str]:
    return sorted(cluster.instances.filter(active=True).values_list("address__ip", flat=True))


# ---------------------------------------------------------------- the owner's list


@pytest.mark.parametrize(
    ("given", "kept"),
    [
        ("10.1.2.3", ["10.1.2.3/32"]),
        ("10.1.2.3/24, 192.0.2.0/28 10.1.2.0/24", ["10.1.2.0/24", "192.0.2.0/28"]),
        (["172.16.0.0/12", " 10.0.0.1 "], ["10.0.0.1/32", "172.16.0.0/12"]),
        ([], []),
    ],
)
def test_an_allow_list_is_kept_normalised(given, kept):
    assert rules.parse_sources(given) == kept


@pytest.mark.parametrize(
    ("given", "named"),
    [
        ("10.1.2.300", "'10.1.2.300'"),
        (["10.0.0.0/8", "example.org"], "'example.org'"),
        ("2001:db8::/32", "IPv6"),
        ("10.0.0.1; drop", "'10.0.0.1;'"),
        ([7], "7"),
        (7, "a list"),
        ({"10.0.0.0/8": 1}, "a list"),
        ("1" * 500, r"'1111+\.\.\. is not"),
    ],
)
def test_a_bad_entry_is_refused_by_name(given, named):
    with pytest.raises(rules.SourceError, match=named):
        rules.parse_sources(given)


def test_an_allow_list_is_bounded(settings):
    settings.PERIMETER_MAX_SOURCES = 2
    with pytest.raises(rules.SourceError, match="at most 2"):
        rules.parse_sources("10.0.0.1 10.0.0.2 10.0.0.3")


# ---------------------------------------------------------------- what a node is given


def test_a_node_lets_in_members_the_portal_the_site_and_the_owners_sources_only(
    fake_nodes, pool, alice, demo, settings
):
    settings.PERIMETER_PORTAL_SOURCES = ["192.0.2.10"]
    settings.PERIMETER_SITE_SOURCES = ["198.51.100.0/24"]
    cluster = placed(alice, demo, allowed=["203.0.113.7/32"])
    other = placed(alice, demo)
    node = cluster.instances.first().node
    node_rules = rules.node_rules(node)
    guarded = {g.address: set(g.sources) for g in node_rules.guarded}
    for instance in cluster.instances.filter(node=node):
        assert guarded[instance.address.ip] == {
            *(f"{ip}/32" for ip in addresses(cluster)),
            "10.9.255.253/32",  # the network's portal address (a lab shim's)
            "192.0.2.10/32",
            "198.51.100.0/24",
            "203.0.113.7/32",
        }
    for instance in other.instances.filter(node=node):  # its owner allowed nothing more
        assert "203.0.113.7/32" not in guarded[instance.address.ip]
        assert not {f"{ip}/32" for ip in addresses(cluster)} & guarded[instance.address.ip]


def test_the_script_replaces_the_table_whole_and_refuses_what_is_not_allowed(
    fake_nodes, pool, alice, demo
):
    cluster = placed(alice, demo, size=1, allowed=["203.0.113.0/24"])
    instance = cluster.instances.get()
    script = rules.node_rules(instance.node).script()
    table = rules.table_name(instance.node.name)
    lines = script.splitlines()
    # One transaction: made if missing, deleted, made again; nothing of another table.
    assert lines[:3] == [
        f"table inet {table} {{}}",
        f"delete table inet {table}",
        f"table inet {table} {{",
    ]
    assert "tcp dport 22 accept" in script
    ip = instance.address.ip
    allow = next(line for line in lines if line.strip().startswith(f"ip daddr {ip} ip saddr"))
    assert "203.0.113.0/24" in allow and "accept" in allow
    assert f"ip daddr {{ {ip} }} meta l4proto tcp reject with tcp reset" in script
    parent = instance.address.network.parent or instance.node.network_parent
    assert f'type filter hook ingress device "{parent}" priority filter' in script
    assert f"ip daddr {{ {ip} }} drop" in script


def test_a_node_with_nothing_to_guard_holds_no_table(pool):
    script = rules.node_rules(pool[0]).script()
    assert script.splitlines() == [
        f"table inet {rules.table_name(pool[0].name)} {{}}",
        f"delete table inet {rules.table_name(pool[0].name)}",
    ]


def test_sites_and_nodes_have_tables_of_their_own(settings):
    settings.PLATTER_SITE = "test-a"
    a = rules.table_name("lab-1")
    assert a == "platter_test_a_lab_1"
    assert a != rules.table_name("lab-2") != rules.table_name("lab-1", site="test-b")
    import re

    assert re.fullmatch(rules.tables_of_nodes(["lab-1", "lab-2"]), rules.table_name("lab-2"))
    assert not re.fullmatch(rules.tables_of_nodes(["lab-1"], site="test-b"), a)


# ---------------------------------------------------------------- when nodes get them


def test_the_rules_are_on_each_node_before_any_container_of_the_cluster_starts(
    fake_nodes, pool, alice, demo
):
    cluster = placed(alice, demo, size=2)
    assert operations.run("launch", cluster.id) == S.RUNNING
    for node in {i.node for i in cluster.instances.all()}:
        calls = [method for name, method, _ in fake_nodes.calls if name == node.name]
        assert "set_firewall" in calls
        first_create = min(i for i, m in enumerate(calls) if m in ("ensure_running", "create"))
        assert calls.index("set_firewall") < first_create, calls
        for instance in cluster.instances.filter(node=node):
            assert f"ip daddr {instance.address.ip} ip saddr" in fake_nodes.firewalls[node.name]


def test_a_node_refusing_the_rules_starts_nothing_there(fake_nodes, pool, alice, demo):
    from apps.nodes import NodeRefused

    cluster = placed(alice, demo, size=1)
    node = cluster.instances.get().node
    fake_nodes.failures["set_firewall"] = [NodeRefused(node.name, "its firewall refused")] * 8
    operations.run("launch", cluster.id)
    assert not fake_nodes.running(node.name)
    cluster.refresh_from_db()
    assert cluster.state in (S.QUEUED, S.FAILED), cluster.state


def test_a_destroyed_clusters_addresses_leave_the_rules(fake_nodes, pool, alice, demo):
    cluster = placed(alice, demo, size=1)
    assert operations.run("launch", cluster.id) == S.RUNNING
    instance = cluster.instances.get()
    assert instance.address.ip in fake_nodes.firewalls[instance.node.name]
    services.request_destroy(cluster.id, keep_data=True)
    assert operations.run("destroy", cluster.id) == S.DESTROYED
    assert instance.address.ip not in fake_nodes.firewalls[instance.node.name]
    assert "delete table" in fake_nodes.firewalls[instance.node.name]


def test_an_owners_change_reaches_the_nodes_and_is_recorded(
    fake_nodes, pool, alice, demo, settings
):
    cluster = placed(alice, demo, size=1)
    assert operations.run("launch", cluster.id) == S.RUNNING
    node = cluster.instances.get().node
    rules.set_allowed_sources(cluster.id, "198.51.100.0/24", by="alice")
    from workers.tasks import apply_perimeter

    assert apply_perimeter(cluster.id) == []
    assert "198.51.100.0/24" in fake_nodes.firewalls[node.name]
    assert ClusterEvent.objects.filter(
        cluster=cluster, message="allowed sources set to 198.51.100.0/24 by alice"
    ).exists()
    rules.set_allowed_sources(cluster.id, [], by="alice")
    apply_perimeter(cluster.id)
    assert "198.51.100.0/24" not in fake_nodes.firewalls[node.name]


def test_a_destroyed_clusters_list_cannot_change(fake_nodes, pool, alice, demo):
    cluster = placed(alice, demo, size=1)
    Cluster.objects.filter(id=cluster.id).update(state=S.DESTROYED)
    with pytest.raises(rules.SourceError, match="destroyed"):
        rules.set_allowed_sources(cluster.id, "10.0.0.0/8", by="alice")


def test_the_reconciler_gives_a_node_its_rules_back_when_they_changed_or_aged(
    fake_nodes, pool, alice, demo, settings
):
    cluster = placed(alice, demo, size=1)
    assert operations.run("launch", cluster.id) == S.RUNNING
    node = cluster.instances.get().node
    # Loaded at launch and remembered: a pass does not load them again...
    assert node.name not in reconciler.reconcile()["perimeter"]
    # ...until the node is known to have lost them (or PERIMETER_REFRESH_SECONDS passed).
    fake_nodes.firewalls.pop(node.name)
    perimeter.forget([node])
    assert node.name in reconciler.reconcile()["perimeter"]
    assert cluster.instances.get().address.ip in fake_nodes.firewalls[node.name]


def test_the_reconciler_loads_rules_before_it_starts_a_lost_container_again(
    fake_nodes, pool, alice, demo
):
    cluster = placed(alice, demo, size=1)
    assert operations.run("launch", cluster.id) == S.RUNNING
    node = cluster.instances.get().node
    fake_nodes.containers[node.name].clear()  # the node came back empty (a reboot)
    perimeter.forget([node])
    fake_nodes.calls.clear()
    reconciler.reconcile(grace_seconds=0)
    calls = [method for name, method, _ in fake_nodes.calls if name == node.name]
    assert "set_firewall" in calls
    starts = [i for i, m in enumerate(calls) if m in ("ensure_running", "create", "start")]
    if starts:
        assert calls.index("set_firewall") < min(starts), calls


def test_without_the_perimeter_nodes_hold_no_table(fake_nodes, pool, alice, demo, settings):
    settings.PERIMETER = False
    cluster = placed(alice, demo, size=1)
    assert operations.run("launch", cluster.id) == S.RUNNING
    node = cluster.instances.get().node
    assert "table inet" in fake_nodes.firewalls[node.name]
    assert "chain" not in fake_nodes.firewalls[node.name]


def test_a_node_is_loaded_under_its_lock_and_a_held_lock_makes_the_load_wait(
    fake_nodes, pool, alice, demo, monkeypatch
):
    """Two operations loading one node at once could land the older view last (an instance
    placed in between left unguarded): each reads and loads a node's rules under its lock."""
    from django.db import connection

    from apps.nodes.fake import FakeNodeClient
    from portal import locks

    cluster = placed(alice, demo, size=1)
    node = cluster.instances.get().node
    seen: list[bool] = []
    loaded = FakeNodeClient.set_firewall

    def checked(self, script: str) -> None:
        try:  # a node thread: a connection of its own, closed again
            seen.append(locks.held(locks.PERIMETER, node.id))
        finally:
            connection.close()
        loaded(self, script)

    monkeypatch.setattr(FakeNodeClient, "set_firewall", checked)
    assert perimeter.apply([node]) == {}
    assert seen == [True]

    # Another holder keeps the lock: this load waits for it, then says the node is busy.
    monkeypatch.setattr(perimeter, "LOCK_SECONDS", 0.3)
    with locks.advisory_lock(locks.PERIMETER, node.id) as got:
        assert got
        from apps.clusters.tests.parallel import run_together

        (outcome,) = run_together([lambda: perimeter.apply([node])])
    assert set(outcome) == {node.name} and outcome[node.name].transient
    assert "being loaded by another operation" in outcome[node.name].message
