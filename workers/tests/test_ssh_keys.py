"""A key change reaches the sshd instance of the owner's live clusters (workers/ssh_keys.py);
the exec itself is faked here (the lab test logs in for real: test_ssh_login.py)."""

import pytest

from apps.accounts import ssh
from apps.accounts.tests.keys import ed25519_public
from apps.catalog.models import ProductVersion
from apps.catalog.services import load_catalog
from apps.clusters.models import Cluster
from apps.clusters.reservation import reserve
from apps.clusters.services import InstanceWant, create_cluster
from apps.clusters.tests.factories import make_network, make_node
from apps.nodes import NodeClient, NodeError
from workers import ssh_keys, tasks

S = Cluster.State


@pytest.fixture
def execs(monkeypatch):
    """Every exec as (container, argv); answers from `results` (default: success)."""
    calls, results = [], {}

    def fake(client, container, argv, timeout):
        calls.append((container, argv))
        outcome = results.get(container, (0, "ok"))
        if isinstance(outcome, Exception):
            raise outcome
        return outcome

    monkeypatch.setattr(NodeClient, "exec", fake)
    return calls, results


def cluster_of(owner, product: str, state: str, name: str) -> Cluster:
    version = ProductVersion.objects.filter(product__name=product).order_by("id").first()
    first = {"spark": "master", "demo": "master", "cassandra": "seed"}[product]
    wants = [InstanceWant(first, 0, 1, 1024, 0, "ssd"), InstanceWant(first, 1, 1, 1024, 0, "ssd")]
    cluster = create_cluster(owner, version, name, wants)
    reserve(cluster.id)
    Cluster.objects.filter(id=cluster.id).update(state=state)
    return cluster


@pytest.fixture
def pool(db):
    load_catalog()
    make_network()
    make_node(cores=64, memory_mb=65536, disks={"ssd": 2})


def test_it_rewrites_the_keys_of_each_live_cluster_with_sshd(pool, alice, bob, execs):
    calls, _ = execs
    running = cluster_of(alice, "spark", S.RUNNING, "a")
    degraded = cluster_of(alice, "cassandra", S.DEGRADED, "b")
    cluster_of(alice, "spark", S.STOPPED, "c")  # gets them at its next start
    cluster_of(alice, "demo", S.RUNNING, "d")  # no sshd
    cluster_of(bob, "spark", S.RUNNING, "e")  # not alice's
    line = ssh.add_key(alice, ed25519_public()).public_key

    assert tasks.sync_ssh_keys(alice.id) == {"updated": [running.id, degraded.id], "failed": []}
    assert calls == [
        (_name(running, "master"), [ssh_keys.KEYS_COMMAND, line]),
        (_name(degraded, "seed"), [ssh_keys.KEYS_COMMAND, line]),
    ]


def _name(cluster: Cluster, role: str) -> str:
    from apps.clusters.container_specs import container_name

    return container_name(cluster.id, role, 0)


def test_removing_the_last_key_empties_authorized_keys(pool, alice, execs):
    calls, _ = execs
    cluster = cluster_of(alice, "spark", S.RUNNING, "a")
    key = ssh.add_key(alice, ed25519_public())
    ssh.delete_key(alice, key.id)
    assert tasks.sync_ssh_keys(alice.id)["updated"] == [cluster.id]
    assert calls == [(_name(cluster, "master"), [ssh_keys.KEYS_COMMAND])]


def test_a_node_that_fails_is_reported_and_the_others_still_get_the_keys(pool, alice, execs):
    _, results = execs
    broken = cluster_of(alice, "spark", S.RUNNING, "a")
    fine = cluster_of(alice, "spark", S.RUNNING, "b")
    results[_name(broken, "master")] = NodeError("lab-1", "connection refused", True)
    assert ssh_keys.push_keys(alice.id) == {"updated": [fine.id], "failed": [broken.id]}
    results[_name(broken, "master")] = (2, "platter-ssh-keys: a key must be one line")
    assert ssh_keys.push_keys(alice.id)["failed"] == [broken.id]


def test_a_change_during_the_write_is_written_too(pool, alice, execs, monkeypatch):
    calls, _ = execs
    cluster_of(alice, "spark", S.RUNNING, "a")
    first = ssh.add_key(alice, ed25519_public()).public_key
    later = ed25519_public()
    real = NodeClient.exec

    def add_meanwhile(client, container, argv, timeout):
        if len(calls) == 0:
            ssh.add_key(alice, later)  # another request commits while this exec runs
        return real(client, container, argv, timeout)

    monkeypatch.setattr(NodeClient, "exec", add_meanwhile)
    ssh_keys.push_keys(alice.id)
    assert [argv[1:] for _, argv in calls] == [[first], [first, later]]
