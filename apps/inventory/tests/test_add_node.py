"""manage.py add_node against the real lab's dockerds: a node that answers is registered with
what `docker info` says; each way it can fail is named and registers nothing."""

import io
import shutil
import socket

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from apps.inventory.models import Node
from apps.nodes import engine, pki


def add_node(*args: str) -> str:
    out = io.StringIO()
    call_command("add_node", *args, stdout=out)
    return out.getvalue()


def tls_node(nodes: list[Node]) -> Node:
    return next(node for node in nodes if node.transport == "tcp")


def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]  # nobody listens once the socket is closed


@pytest.fixture
def rogue_ca(tmp_path):
    """A CA the lab never heard of, with a client certificate of its own."""
    pki.ensure_ca(tmp_path / "rogue-ca", "Rogue CA")
    pki.issue(tmp_path / "rogue-ca", tmp_path / "rogue", "intruder", client=True)
    return tmp_path / "rogue"


def test_a_lab_node_registers_under_another_name_with_what_docker_info_says(lab_inventory):
    lab = tls_node(lab_inventory)
    info = engine.connect(lab.endpoint, lab.tls_dir).info()
    output = add_node(
        "copy-1",
        "--endpoint",
        lab.endpoint,
        "--tls-dir",
        lab.tls_dir,
        "--disk-root",
        lab.disk_root,
        "--network-parent",
        lab.network_parent,
    )
    node = Node.objects.get(name="copy-1")
    assert (node.endpoint, node.tls_dir) == (lab.endpoint, lab.tls_dir)
    assert (node.disk_root, node.network_parent) == (lab.disk_root, lab.network_parent)
    assert node.state == Node.State.MAINTENANCE
    assert node.cores == info["NCPU"] and node.memory_mb == info["MemTotal"] // 2**20
    assert node.labels == {"arch": info["Architecture"]}
    assert f"docker root {info['DockerRootDir']}" in output and info["OperatingSystem"] in output
    assert "discover_disks copy-1" in output and "bench_disks copy-1" in output
    # The next step it names works on the new node.
    call_command("discover_disks", "copy-1", stdout=io.StringIO())
    assert node.disks.count() == lab.disks.count()


def test_given_cores_memory_and_state_win_over_docker_info(lab_inventory):
    lab = tls_node(lab_inventory)
    add_node(
        "copy-2",
        "--endpoint",
        lab.endpoint,
        "--tls-dir",
        lab.tls_dir,
        "--cores",
        "1",
        "--memory-mb",
        "512",
        "--state",
        "active",
    )
    node = Node.objects.get(name="copy-2")
    assert (node.cores, node.memory_mb, node.state) == (1, 512, Node.State.ACTIVE)


def test_the_ssh_node_registers_without_a_tls_dir(lab_inventory):
    lab = next(node for node in lab_inventory if node.transport == "ssh")
    add_node("copy-ssh", "--endpoint", lab.endpoint, "--tls-dir", "/ignored/for/ssh")
    assert Node.objects.get(name="copy-ssh").tls_dir == ""


def assert_refused(match: str, *args: str) -> None:
    before = Node.objects.count()
    with pytest.raises(CommandError, match=match):
        add_node(*args)
    assert Node.objects.count() == before, "a failed add_node registered a node"


def test_a_name_already_taken_is_refused_before_connecting(lab_inventory):
    lab = tls_node(lab_inventory)
    assert_refused(
        "already registered", lab.name, "--endpoint", "tcp://127.0.0.1:1", "--tls-dir", lab.tls_dir
    )


def test_nothing_listening_is_named(lab_inventory):
    lab = tls_node(lab_inventory)
    endpoint = f"tcp://127.0.0.1:{closed_port()}"
    assert_refused(
        "nothing listens on 127.0.0.1", "x", "--endpoint", endpoint, "--tls-dir", lab.tls_dir
    )


def test_a_tcp_endpoint_without_tls_dir_is_refused(lab_inventory):
    assert_refused(
        "mutual TLS only; give --tls-dir", "x", "--endpoint", tls_node(lab_inventory).endpoint
    )


def test_a_tls_dir_with_missing_files_is_named(lab_inventory, tmp_path):
    shutil.copytree(tls_node(lab_inventory).tls_dir, tmp_path / "tls")
    (tmp_path / "tls" / "key.pem").unlink()
    assert_refused(
        "lacks key.pem",
        "x",
        "--endpoint",
        tls_node(lab_inventory).endpoint,
        "--tls-dir",
        str(tmp_path / "tls"),
    )


def test_a_node_certificate_from_another_ca_fails_verification(lab_inventory, rogue_ca):
    assert_refused(
        "not signed by the CA in",
        "x",
        "--endpoint",
        tls_node(lab_inventory).endpoint,
        "--tls-dir",
        str(rogue_ca),
    )


def test_a_client_certificate_the_node_does_not_trust_is_named(lab_inventory, rogue_ca):
    lab = tls_node(lab_inventory)
    shutil.copy(f"{lab.tls_dir}/ca.pem", rogue_ca / "ca.pem")  # the node is trusted, we are not
    assert_refused(
        "node refused our client certificate",
        "x",
        "--endpoint",
        lab.endpoint,
        "--tls-dir",
        str(rogue_ca),
    )


def test_an_ssh_login_that_fails_says_what_ssh_said(lab_inventory):
    endpoint = f"ssh://root@127.0.0.1:{closed_port()}"
    assert_refused("Connection refused", "x", "--endpoint", endpoint)
