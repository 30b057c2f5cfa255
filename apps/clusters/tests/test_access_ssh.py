"""The ssh way into a cluster (apps.clusters.access.ssh_*): which instance runs sshd, the keys
its container gets, and the command the cluster page shows."""

import pytest

from apps.accounts import ssh
from apps.accounts.tests.keys import ed25519_public
from apps.catalog.models import ProductVersion
from apps.catalog.services import load_catalog
from apps.clusters import access
from apps.clusters.reservation import reserve
from apps.clusters.services import InstanceWant, create_cluster

from .factories import make_network, make_node


@pytest.fixture
def spark(db) -> ProductVersion:
    load_catalog()
    return ProductVersion.objects.get(product__name="spark")


def placed(owner, version, roles: list[tuple[str, int]]):
    make_network()
    make_node(disks={"ssd": 4, "hdd": 4})
    wants = [InstanceWant(role, index, 1, 1024, 0, "ssd") for role, index in roles]
    cluster = create_cluster(owner, version, "s", wants)
    reserve(cluster.id)
    cluster.refresh_from_db()
    return cluster


def instance(cluster, role: str, index: int):
    return cluster.instances.select_related("address").get(role=role, index=index)


def test_every_jvm_product_declares_its_way_in(db):
    load_catalog()
    for product, role in [
        ("spark", "master"),
        ("hadoop", "master"),
        ("cassandra", "seed"),
        ("mongodb", "member"),
    ]:
        version = ProductVersion.objects.filter(product__name=product).order_by("id").first()
        assert access.ssh_port(version) == {
            "role": role,
            "port": 22,
            "name": "SSH (the cluster owner's keys)",
            "scheme": "ssh",
            "allows": "SSH as root with your keys only",
        }
        # sshd as root needs its privilege separation chroot and its login audit record
        assert {"SYS_CHROOT", "AUDIT_WRITE"} <= set(version.capabilities)
    demo = ProductVersion.objects.get(product__name="demo")
    assert access.ssh_port(demo) is None


def test_only_the_first_master_gets_the_owners_keys(spark, alice, bob):
    first, second = ed25519_public("a"), ed25519_public("b")
    ssh.add_key(alice, first)
    ssh.add_key(alice, second)
    ssh.add_key(bob, ed25519_public("bob"))
    cluster = placed(alice, spark, [("master", 0), ("worker", 0), ("worker", 1)])
    assert access.ssh_environment(cluster, instance(cluster, "master", 0)) == {
        "PLATTER_SSH_AUTHORIZED_KEYS": f"{first}\n{second}"
    }
    assert access.ssh_environment(cluster, instance(cluster, "worker", 0)) == {}
    merged = access.instance_environment(cluster, instance(cluster, "master", 0))
    assert merged["PLATTER_SSH_AUTHORIZED_KEYS"] == f"{first}\n{second}"


def test_an_owner_without_keys_still_gets_sshd_with_none(spark, alice):
    cluster = placed(alice, spark, [("master", 0), ("worker", 0)])
    assert access.ssh_environment(cluster, instance(cluster, "master", 0)) == {
        "PLATTER_SSH_AUTHORIZED_KEYS": ""
    }


def test_ssh_login_is_the_command_to_type(spark, alice):
    cluster = placed(alice, spark, [("master", 0), ("worker", 0)])
    master = instance(cluster, "master", 0)
    assert access.ssh_login(cluster) == {
        "command": f"ssh -i <your key> root@{master.address.ip}",
        "user": "root",
        "address": master.address.ip,
        "port": 22,
        "hostname": master.hostname,
    }


def test_ssh_login_names_another_port_and_user(spark, alice):
    spark.ports = [{**p, "port": 2222} if p.get("scheme") == "ssh" else p for p in spark.ports]
    spark.roles = [{**r, "user": "spark"} if r["name"] == "master" else r for r in spark.roles]
    spark.save()
    cluster = placed(alice, spark, [("master", 0), ("worker", 0)])
    ip = instance(cluster, "master", 0).address.ip
    login = access.ssh_login(cluster)
    assert login["command"] == f"ssh -i <your key> -p 2222 spark@{ip}"
    assert (login["user"], login["port"]) == ("spark", 2222)


def test_no_login_without_sshd_or_before_placement(spark, alice):
    cluster = create_cluster(alice, spark, "q", [InstanceWant("master", 0, 1, 1024, 0, "ssd")])
    assert access.ssh_login(cluster) is None  # queued: no address yet
    spark.ports = [p for p in spark.ports if p.get("scheme") != "ssh"]
    spark.save()
    cluster = placed(alice, spark, [("master", 0), ("worker", 0)])
    assert access.ssh_login(cluster) is None
    assert access.ssh_environment(cluster, instance(cluster, "master", 0)) == {}
