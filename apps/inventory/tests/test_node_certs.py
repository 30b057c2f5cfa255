"""The portal CA (apps.nodes.pki) and manage.py node_certs: the files it writes make a real
mutual-TLS handshake work, keys are private files, and no key is ever printed."""

import io
import ipaddress
import json
import ssl
import stat
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import requests
from cryptography import x509
from django.core.management import call_command

from apps.inventory.models import Node
from apps.nodes import engine, pki


@pytest.fixture
def pki_dir(db, settings, tmp_path) -> Path:
    """A portal CA of the test's own (node_certs also looks the node up in the database)."""
    settings.PKI_DIR = tmp_path / "pki"
    return settings.PKI_DIR


def key_lines(path: Path) -> list[str]:
    """The base64 body of a PEM private key, line by line: none may show up anywhere."""
    return [line for line in path.read_text().splitlines() if line and "-----" not in line]


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def node_certs(*args: str) -> str:
    out = io.StringIO()
    call_command("node_certs", *args, stdout=out)
    return out.getvalue()


class PingHandler(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"OK")

    def log_message(self, *args) -> None:
        pass


@pytest.fixture
def tls_server(pki_dir, tmp_path):
    """An HTTPS server set up the way node_certs tells a node's dockerd to be: its server
    certificate and key, and client certificates required and checked against ca.pem."""
    node_files = tmp_path / "node-files"
    node_certs("node-9", "--address", "127.0.0.1", "--out", str(node_files))
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(node_files / "server-cert.pem", node_files / "server-key.pem")
    context.load_verify_locations(node_files / "ca.pem")
    context.verify_mode = ssl.CERT_REQUIRED
    server = ThreadingHTTPServer(("127.0.0.1", 0), PingHandler)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"tcp://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_the_portal_ca_and_client_certificate_are_private_files(pki_dir):
    client = pki.ensure_portal_client()
    assert client == pki_dir / "client"
    for folder in (pki_dir, pki_dir / "ca", client):
        assert mode(folder) == 0o700
    for key in (pki_dir / "ca" / "ca-key.pem", client / "key.pem"):
        assert mode(key) == 0o600
    assert pki.tls_status(str(client)).complete


def test_the_ca_is_made_once_and_kept(pki_dir):
    pki.ensure_portal_client()
    first = (pki_dir / "ca" / "ca.pem").read_bytes()
    pki.ensure_portal_client()
    assert (pki_dir / "ca" / "ca.pem").read_bytes() == first


def test_node_certs_writes_a_server_certificate_for_every_address(pki_dir):
    output = node_certs("node-1", "--address", "10.0.0.7", "--address", "node1.example.org")
    folder = pki_dir / "nodes" / "node-1"
    assert sorted(p.name for p in folder.iterdir()) == sorted(pki.NODE_FILES)
    assert mode(folder) == 0o700 and mode(folder / "server-key.pem") == 0o600
    cert = x509.load_pem_x509_certificate((folder / "server-cert.pem").read_bytes())
    ca = x509.load_pem_x509_certificate((pki_dir / "ca" / "ca.pem").read_bytes())
    cert.verify_directly_issued_by(ca)
    names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert names.get_values_for_type(x509.IPAddress) == [ipaddress.ip_address("10.0.0.7")]
    assert names.get_values_for_type(x509.DNSName) == ["node1.example.org"]
    assert str(folder / "server-key.pem") in output


def test_node_certs_prints_daemon_json_the_override_and_how_to_register(pki_dir):
    output = node_certs("node-1", "--address", "10.0.0.7")
    start = output.index("daemon.json:\n") + len("daemon.json:\n")
    daemon = json.JSONDecoder().raw_decode(output[start:])[0]
    assert daemon["tlsverify"] is True
    assert daemon["hosts"] == ["unix:///var/run/docker.sock", "tcp://0.0.0.0:2376"]
    assert daemon["tlskey"] == "/etc/docker/platter/server-key.pem"
    assert "ExecStart=\nExecStart=/usr/sbin/dockerd --containerd" in output
    assert "-H fd://" in output  # says why the override is needed
    client = pki_dir / "client"
    assert f"add_node node-1 --endpoint tcp://10.0.0.7:2376 --tls-dir {client}" in output


def test_node_certs_points_a_node_in_maintenance_at_the_portal_client(pki_dir):
    add = Node.objects.create
    add(
        name="setting-up",
        endpoint="tcp://10.0.0.8:2376",
        cores=4,
        memory_mb=4096,
        state=Node.State.MAINTENANCE,
    )
    in_use = add(
        name="in-use", endpoint="tcp://10.0.0.9:2376", tls_dir="/old/tls", cores=4, memory_mb=4096
    )
    node_certs("setting-up", "--address", "10.0.0.8")
    output = node_certs("in-use", "--address", "10.0.0.9")
    assert Node.objects.get(name="setting-up").tls_dir == str(pki_dir / "client")
    assert Node.objects.get(id=in_use.id).tls_dir == "/old/tls"
    assert "keeps tls_dir /old/tls" in output


def test_node_certs_never_prints_a_private_key(pki_dir, tmp_path):
    output = node_certs("node-1", "--address", "10.0.0.7", "--out", str(tmp_path / "out"))
    for key in (
        tmp_path / "out" / "server-key.pem",
        pki_dir / "client" / "key.pem",
        pki_dir / "ca" / "ca-key.pem",
    ):
        assert not [line for line in key_lines(key) if line in output]
    assert "PRIVATE KEY" not in output


def test_the_files_make_a_mutual_tls_handshake(tls_server, pki_dir):
    client = engine.connect(tls_server, str(pki_dir / "client"), timeout=5)
    assert client.api.ping() is True


def test_a_client_of_another_ca_is_refused_by_a_node_set_up_from_node_certs(
    tls_server, pki_dir, tmp_path
):
    pki.ensure_ca(tmp_path / "rogue-ca", "Rogue CA")
    pki.issue(tmp_path / "rogue-ca", tmp_path / "rogue", "intruder", client=True)
    # Trust the real CA, so only our (rogue) client certificate can fail the handshake.
    (tmp_path / "rogue" / "ca.pem").write_bytes((pki_dir / "ca" / "ca.pem").read_bytes())
    client = engine.connect(tls_server, str(tmp_path / "rogue"), timeout=5)
    with pytest.raises(requests.exceptions.SSLError) as raised:
        client.api.ping()
    assert not [line for line in key_lines(tmp_path / "rogue" / "key.pem") if line in str(raised)]


def test_tls_status_names_missing_files_and_the_earliest_expiry(pki_dir, tmp_path):
    client = pki.ensure_portal_client()
    status = pki.tls_status(str(client))
    expiries = [pki.certificate_expiry(client / name) for name in ("cert.pem", "ca.pem")]
    assert status.missing == [] and status.expires == min(expiries)
    (client / "key.pem").unlink()
    assert pki.tls_status(str(client)).missing == ["key.pem"]
    assert pki.tls_status("").missing == list(pki.CLIENT_FILES)
