"""The lab is real: TLS nodes demand client certificates, the SSH node speaks docker's ssh://
transport, disks are mounted block devices, and containers on different nodes reach each other
on portal-assigned addresses."""

import os
import socket
import ssl
import stat
import uuid
from pathlib import Path

import docker
import pytest
import requests
from django.conf import settings

from apps.inventory.models import Disk, Network, Node
from apps.lab import host
from apps.lab.host import mounted_device
from apps.lab.image import lab_network_spec
from apps.lab.nodes import state_dir
from apps.lab.segments import slot_segments
from apps.nodes import engine, pki

pytestmark = pytest.mark.lab


def tls_nodes(nodes: list[Node]) -> list[Node]:
    return [node for node in nodes if node.endpoint.startswith("tcp://")]


def test_it_registers_every_lab_node_with_its_disks(lab_inventory):
    assert len(tls_nodes(lab_inventory)) == settings.LAB_NODES
    assert any(node.endpoint.startswith("ssh://") for node in lab_inventory)
    for node in lab_inventory:
        assert node.disks.count() == settings.LAB_DISKS_PER_NODE
    # This portal's cluster networks: its slot's segments, each on a bridge of its own.
    networks = Network.objects.order_by("name")
    assert [n.name for n in networks] == sorted(s.network_name for s in slot_segments())
    assert all(n.isolated and host.link_exists(n.parent) for n in networks)
    assert len({n.parent for n in networks}) == len({n.subnet for n in networks}) == len(networks)


def test_each_tls_node_answers_a_client_with_the_portal_certificate(lab_inventory):
    for node in tls_nodes(lab_inventory):
        client = engine.connect(node.endpoint, node.tls_dir)
        assert client.ping() is True
        assert settings.LAB_IMAGE in [tag for image in client.images.list() for tag in image.tags]


def test_a_tls_node_refuses_a_client_without_a_certificate(lab_inventory):
    node = tls_nodes(lab_inventory)[0]
    url = node.endpoint.replace("tcp://", "https://") + "/_ping"
    # The server certificate is trusted, but no client certificate is presented.
    with pytest.raises(requests.exceptions.SSLError):
        requests.get(url, verify=os.path.join(node.tls_dir, "ca.pem"), timeout=5)


def test_a_tls_node_refuses_a_certificate_from_another_ca(lab_inventory, tmp_path):
    node = tls_nodes(lab_inventory)[0]
    pki.ensure_ca(tmp_path / "rogue-ca", "Rogue CA")
    pki.issue(tmp_path / "rogue-ca", tmp_path / "rogue", "intruder", client=True)
    # Trust the real node CA so only the client side of the handshake can fail.
    (tmp_path / "rogue" / "ca.pem").write_bytes((state_dir() / "pki/ca/ca.pem").read_bytes())
    client = engine.connect(node.endpoint, str(tmp_path / "rogue"), timeout=5)
    with pytest.raises((docker.errors.DockerException, requests.exceptions.ConnectionError)):
        client.ping()


def test_a_tls_node_refuses_plain_http(lab_inventory):
    node = tls_nodes(lab_inventory)[0]
    url = node.endpoint.replace("tcp://", "http://") + "/_ping"
    response = requests.get(url, timeout=5)
    assert response.status_code == 400  # Go's TLS server answers plain HTTP with 400
    assert "OK" not in response.text


def test_the_node_certificate_is_not_trusted_without_the_lab_ca(lab_inventory):
    node = tls_nodes(lab_inventory)[0]
    host, port = node.endpoint.removeprefix("tcp://").split(":")
    context = ssl.create_default_context()  # the system CAs only: they never signed a node
    with (
        socket.create_connection((host, int(port)), timeout=5) as sock,
        pytest.raises(ssl.SSLCertVerificationError),
    ):
        context.wrap_socket(sock, server_hostname=host)


def test_the_ssh_node_works_through_dockers_ssh_transport(lab_inventory):
    node = next(n for n in lab_inventory if n.endpoint.startswith("ssh://"))
    client = engine.connect(node.endpoint)
    assert client.ping() is True
    name = f"ssh-probe-{uuid.uuid4().hex[:8]}"
    output = client.containers.run(
        settings.LAB_IMAGE, ["echo", "over ssh"], name=name, network_mode="none", remove=True
    )
    assert output.strip() == b"over ssh"


def test_each_lab_disk_is_a_block_device_mounted_where_the_inventory_says(lab_inventory):
    disks = Disk.objects.filter(node__in=lab_inventory)
    assert disks.count() == len(lab_inventory) * settings.LAB_DISKS_PER_NODE
    devices = set()
    for disk in disks:
        assert stat.S_ISBLK(os.stat(disk.device).st_mode), f"{disk.device} is not a block device"
        assert mounted_device(Path(disk.mount_path)) == disk.device
        assert disk.capacity_bytes > 0
        devices.add(disk.device)
    assert len(devices) == disks.count(), "two inventory disks share one device"


def test_a_file_written_in_a_container_lands_on_the_disk_mounted_there(lab_inventory):
    node = tls_nodes(lab_inventory)[0]
    disk = node.disks.first()
    marker = f"marker-{uuid.uuid4().hex}"
    client = engine.cached(node)
    client.containers.run(
        settings.LAB_IMAGE,
        ["sh", "-c", f"echo {marker} > /data/1/{marker}"],
        volumes={disk.mount_path: {"bind": "/data/1", "mode": "rw"}},
        network_mode="none",
        remove=True,
    )
    written = os.path.join(disk.mount_path, marker)
    try:
        assert Path(written).read_text().strip() == marker
        other_disks = node.disks.exclude(pk=disk.pk)
        assert not any(os.path.exists(os.path.join(d.mount_path, marker)) for d in other_disks)
    finally:
        os.remove(written)


def test_containers_on_two_nodes_reach_each_other_by_portal_assigned_address(lab_inventory):
    first, second = tls_nodes(lab_inventory)[:2]
    # The lab's flat network (bench/ baselines use it; no portal's cluster does), at the top.
    base = lab_network_spec()["last_address"].rsplit(".", 1)[0]
    server_ip, client_ip = f"{base}.251", f"{base}.252"
    started = []
    try:
        server = run_on(first, "probe-server", server_ip, ["sleep", "60"], started)
        assert server.status in {"created", "running"}
        probe = run_on(
            second,
            "probe-client",
            client_ip,
            ["ping", "-c", "2", "-W", "2", "probe-server"],
            started,
            extra_hosts={"probe-server": server_ip},
        )
        result = probe.wait(timeout=30)
        assert result["StatusCode"] == 0, probe.logs().decode()
        assert f"from {server_ip}" in probe.logs().decode()
    finally:
        for container in started:
            container.remove(force=True)


def run_on(node: Node, name: str, ip: str, command: list[str], started: list, **options):
    client = engine.cached(node)
    unique = f"{name}-{uuid.uuid4().hex[:6]}"
    container = client.containers.create(
        settings.LAB_IMAGE,
        command,
        name=unique,
        hostname=name,
        network=settings.NODE_NETWORK_NAME,
        networking_config={
            settings.NODE_NETWORK_NAME: client.api.create_endpoint_config(ipv4_address=ip)
        },
        **options,
    )
    started.append(container)
    container.start()
    container.reload()
    return container
