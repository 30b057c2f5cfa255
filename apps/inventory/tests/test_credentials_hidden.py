"""Node credentials are never shown: not in the admin, not in the API, not in logs or error
messages. The key checked for is the real one the lab's nodes are reached with."""

import io
import logging
import shutil
from pathlib import Path

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from rest_framework.test import APIClient

from apps.inventory.models import Node
from apps.nodes import NodeError, engine, pki


def key_lines(path: Path) -> list[str]:
    """The base64 body of a PEM private key, line by line."""
    return [line for line in path.read_text().splitlines() if line and "-----" not in line]


def leaked(text: str, *keys: Path) -> list[str]:
    return [line for key in keys for line in key_lines(key) if line in text]


@pytest.fixture
def tls_nodes(lab_inventory) -> list[Node]:
    return [node for node in lab_inventory if node.transport == "tcp"]


@pytest.fixture
def lab_key(tls_nodes) -> Path:
    key = Path(tls_nodes[0].tls_dir) / "key.pem"
    assert len(key_lines(key)) >= 2, "the lab's client key is not where the node says"
    return key


@pytest.fixture
def rogue(tmp_path) -> Path:
    pki.ensure_ca(tmp_path / "rogue-ca", "Rogue CA")
    pki.issue(tmp_path / "rogue-ca", tmp_path / "rogue", "intruder", client=True)
    return tmp_path / "rogue"


def test_the_node_admin_shows_where_credentials_are_and_until_when_never_the_key(
    client, admin_user, tls_nodes, lab_key
):
    client.force_login(admin_user)
    node = tls_nodes[0]
    page = client.get(f"/admin/inventory/node/{node.id}/change/").content.decode()
    listing = client.get("/admin/inventory/node/").content.decode()
    assert not leaked(page + listing, lab_key)
    assert "BEGIN" not in page
    expires = pki.tls_status(node.tls_dir).expires
    assert f"ca.pem, cert.pem, key.pem present; certificates valid until {expires:%Y-%m-%d}" in page


def test_the_admin_says_when_a_key_file_is_missing(client, admin_user, tls_nodes, tmp_path):
    shutil.copytree(tls_nodes[0].tls_dir, tmp_path / "tls")
    (tmp_path / "tls" / "key.pem").unlink()
    Node.objects.filter(id=tls_nodes[0].id).update(tls_dir=str(tmp_path / "tls"))
    client.force_login(admin_user)
    page = client.get(f"/admin/inventory/node/{tls_nodes[0].id}/change/").content.decode()
    assert "MISSING key.pem" in page


def test_the_api_shows_whether_credentials_are_present_never_the_key_or_its_folder(
    admin_user, tls_nodes, lab_key
):
    api = APIClient()
    api.force_login(admin_user)
    listing = api.get("/api/v1/nodes").content.decode()
    detail = api.get(f"/api/v1/nodes/{tls_nodes[0].id}")
    assert not leaked(listing + detail.content.decode(), lab_key)
    assert tls_nodes[0].tls_dir not in listing + detail.content.decode()
    credentials = detail.json()["credentials"]
    assert credentials["transport"] == "tcp" and credentials["files_present"] is True
    assert credentials["missing"] == [] and credentials["expires"].startswith(
        f"{pki.tls_status(tls_nodes[0].tls_dir).expires:%Y-%m-%d}"
    )
    ssh = next(n for n in api.get("/api/v1/nodes").json()["results"] if n["name"] == "lab-ssh")
    assert ssh["credentials"] == {
        "transport": "ssh",
        "files_present": None,
        "missing": [],
        "expires": None,
    }


def test_a_failing_tls_connection_logs_no_key_material(caplog, tls_nodes, lab_key, rogue):
    # The node is trusted, our (rogue) client certificate is not: the handshake fails.
    shutil.copy(Path(tls_nodes[0].tls_dir) / "ca.pem", rogue / "ca.pem")
    node = Node(name="rogue-view", endpoint=tls_nodes[0].endpoint, tls_dir=str(rogue))
    caplog.set_level(logging.DEBUG)  # urllib3 and docker's debug lines included
    client = engine.connect(node.endpoint, node.tls_dir, timeout=5)
    with pytest.raises(NodeError) as raised:
        engine.call(node, client.api.ping, "ping")
    text = caplog.text + str(raised.value) + repr(raised.value.__cause__)
    assert "retrying" in caplog.text  # the driver did log the failures
    assert not leaked(text, rogue / "key.pem", lab_key)
    assert "PRIVATE KEY" not in text


def test_a_damaged_key_file_is_named_not_quoted(caplog, tls_nodes, tmp_path):
    folder = tmp_path / "tls"
    shutil.copytree(tls_nodes[0].tls_dir, folder)
    key = folder / "key.pem"
    lines = key.read_text().splitlines()
    key.write_text("\n".join(lines[:-2]) + "\n")  # cut off: no END line
    caplog.set_level(logging.DEBUG)
    node = Node(name="damaged", endpoint=tls_nodes[0].endpoint, tls_dir=str(folder))
    with pytest.raises(NodeError) as raised:
        engine.call(node, lambda: engine.connect(node.endpoint, node.tls_dir).ping(), "ping")
    body = [line for line in lines if line and "-----" not in line]
    text = caplog.text + str(raised.value) + repr(raised.value)
    assert not [line for line in body if line in text]


def test_add_node_output_has_no_key_material(tls_nodes, lab_key, rogue):
    out, err = io.StringIO(), io.StringIO()
    with pytest.raises(CommandError) as raised:
        call_command(
            "add_node",
            "x",
            "--endpoint",
            tls_nodes[0].endpoint,
            "--tls-dir",
            str(rogue),
            stdout=out,
            stderr=err,
        )
    said = out.getvalue() + err.getvalue() + str(raised.value)
    assert not leaked(said, lab_key, rogue / "key.pem")
    call_command(
        "add_node",
        "y",
        "--endpoint",
        tls_nodes[0].endpoint,
        "--tls-dir",
        tls_nodes[0].tls_dir,
        stdout=out,
        stderr=err,
    )
    assert "registered node y" in out.getvalue()
    assert not leaked(out.getvalue() + err.getvalue(), lab_key)
