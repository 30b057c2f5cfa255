"""A small certificate authority for the lab: node server certificates and the portal's client
certificate, so every lab dockerd demands mutual TLS exactly like a real node would."""

import datetime as dt
import ipaddress
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

VALIDITY = dt.timedelta(days=825)


def _write_key(path: Path, key: ec.EllipticCurvePrivateKey) -> None:
    path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    path.chmod(0o600)


def _write_cert(path: Path, cert: x509.Certificate) -> None:
    path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))


def _name(common_name: str) -> x509.Name:
    return x509.Name(
        [
            x509.NameAttribute(NameOID.ORGANIZATION_NAME, "Platter lab"),
            x509.NameAttribute(NameOID.COMMON_NAME, common_name),
        ]
    )


def _builder(subject: x509.Name, issuer: x509.Name, public_key) -> x509.CertificateBuilder:
    now = dt.datetime.now(dt.UTC)
    return (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer)
        .public_key(public_key)
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + VALIDITY)
    )


def ensure_ca(folder: Path, common_name: str = "Platter lab CA") -> tuple[Path, Path]:
    """Create the CA once; return (certificate, key) paths."""
    folder.mkdir(parents=True, exist_ok=True)
    cert_path, key_path = folder / "ca.pem", folder / "ca-key.pem"
    if cert_path.exists() and key_path.exists():
        return cert_path, key_path
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (
        _builder(_name(common_name), _name(common_name), key.public_key())
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                key_cert_sign=True,
                crl_sign=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .sign(key, hashes.SHA256())
    )
    _write_key(key_path, key)
    _write_cert(cert_path, cert)
    return cert_path, key_path


def issue(
    ca_folder: Path,
    out_folder: Path,
    common_name: str,
    *,
    server_ips: list[str] | None = None,
    client: bool = False,
) -> tuple[Path, Path]:
    """Issue a server certificate (for the given IPs) or a client certificate, signed by the CA
    in ca_folder; write cert.pem/key.pem plus ca.pem into out_folder and return their paths."""
    ca_cert = x509.load_pem_x509_certificate((ca_folder / "ca.pem").read_bytes())
    ca_key = serialization.load_pem_private_key((ca_folder / "ca-key.pem").read_bytes(), None)
    out_folder.mkdir(parents=True, exist_ok=True)
    key = ec.generate_private_key(ec.SECP256R1())
    usage = ExtendedKeyUsageOID.CLIENT_AUTH if client else ExtendedKeyUsageOID.SERVER_AUTH
    builder = (
        _builder(_name(common_name), ca_cert.subject, key.public_key())
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
    )
    if server_ips:
        names = [x509.IPAddress(ipaddress.ip_address(ip)) for ip in server_ips]
        builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=False)
    cert = builder.sign(ca_key, hashes.SHA256())
    cert_path, key_path = out_folder / "cert.pem", out_folder / "key.pem"
    _write_key(key_path, key)
    _write_cert(cert_path, cert)
    (out_folder / "ca.pem").write_bytes((ca_folder / "ca.pem").read_bytes())
    return cert_path, key_path
