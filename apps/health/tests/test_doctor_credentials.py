"""manage.py doctor looks at every tcp:// node's TLS files: all there, not about to expire."""

import datetime as dt

import pytest
from cryptography import x509

from apps.health import doctor
from apps.inventory.models import Node
from apps.nodes import pki


@pytest.fixture
def portal_client(settings, tmp_path):
    settings.PKI_DIR = tmp_path / "pki"
    return pki.ensure_portal_client()


def tls_node(name: str, tls_dir: str) -> Node:
    return Node.objects.create(
        name=name, endpoint="tcp://10.0.0.5:2376", tls_dir=tls_dir, cores=4, memory_mb=4096
    )


def by_node(name: str) -> doctor.Finding:
    return next(f for f in doctor.credential_findings() if f.what.startswith(f"node {name} "))


@pytest.mark.django_db
def test_fresh_certificates_are_fine_and_dated(portal_client):
    tls_node("fresh", str(portal_client))
    finding = by_node("fresh")
    expires = x509.load_pem_x509_certificate((portal_client / "cert.pem").read_bytes())
    assert finding.ok and f"{expires.not_valid_after_utc:%Y-%m-%d}"[:7] in finding.what


@pytest.mark.django_db
def test_a_missing_key_is_reported_with_the_command_that_makes_one(portal_client):
    (portal_client / "key.pem").unlink()
    tls_node("keyless", str(portal_client))
    finding = by_node("keyless")
    assert not finding.ok and "missing key.pem" in finding.fix
    assert "node_certs keyless" in finding.fix


@pytest.mark.django_db
def test_a_certificate_expiring_soon_is_reported(portal_client, monkeypatch):
    tls_node("old", str(portal_client))
    soon = dt.datetime.now(dt.UTC) + dt.timedelta(days=doctor.CERTIFICATE_WARN_DAYS - 1)
    real = pki.tls_status
    monkeypatch.setattr(pki, "tls_status", lambda d: real(d).__class__(d, [], soon))
    finding = by_node("old")
    assert not finding.ok and "renew" in finding.fix


def test_the_lab_nodes_certificates_are_checked(lab_inventory):
    tcp = [node.name for node in lab_inventory if node.transport == "tcp"]
    findings = doctor.credential_findings()
    assert sorted(f.what.split()[1] for f in findings) == sorted(tcp)
    assert all(f.ok for f in findings)
