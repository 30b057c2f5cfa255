"""The portal's certificate authority: node server certificates and the portal's client
certificate, so every node's dockerd demands mutual TLS and trusts only this portal. It sits in
the node layer, next to the transports that present these files (engine.py, probe.py); the
inventory's node_certs command and admin read it from here.

Keys live in files (0600, in 0700 folders), never in the database: Node.tls_dir names the
folder the portal presents to a node (ca.pem, cert.pem, key.pem). The lab issues its own CA
with the same functions (apps/lab/lab.py).
"""

import datetime as dt
import ipaddress
from dataclasses import dataclass, field
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
from django.conf import settings

VALIDITY = dt.timedelta(days=825)  # the longest lifetime TLS clients commonly accept
# What the portal needs in a node's tls_dir to reach it over tcp:// (engine.tls_config).
CLIENT_FILES = ("ca.pem", "cert.pem", "key.pem")
# What a node's dockerd needs (node_certs writes them for copying to the node).
NODE_FILES = ("ca.pem", "server-cert.pem", "server-key.pem")


def private_folder(path: Path) -> Path:
    """A folder only its owner can enter (it holds private keys)."""
    path.mkdir(parents=True, exist_ok=True)
    path.chmod(0o700)
    return path


def _write_key(path: Path, key: ec.EllipticCurvePrivateKey) -> None:
    pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    path.touch(mode=0o600, exist_ok=True)
    path.chmod(0o600)  # before the key is in it: an existing file may have had wider rights
    path.write_bytes(pem)


def _write_cert(path: Path, cert: x509.Certificate) -> None:
    path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))


def _name(common_name: str) -> x509.Name:
    return x509.Name(
        [
            x509.NameAttribute(NameOID.ORGANIZATION_NAME, "Platter"),
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


def ensure_ca(folder: Path, common_name: str = "Platter CA") -> tuple[Path, Path]:
    """Create the CA once; return (certificate, key) paths."""
    private_folder(folder)
    cert_path, key_path = folder / "ca.pem", folder / "ca-key.pem"
    if cert_path.exists() and key_path.exists():
        return cert_path, key_path
    key = ec.generate_private_key(ec.SECP256R1())
    usage = x509.KeyUsage(
        digital_signature=True,
        key_cert_sign=True,
        crl_sign=True,
        content_commitment=False,
        key_encipherment=False,
        data_encipherment=False,
        key_agreement=False,
        encipher_only=False,
        decipher_only=False,
    )
    cert = (
        _builder(_name(common_name), _name(common_name), key.public_key())
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(usage, critical=True)
        .sign(key, hashes.SHA256())
    )
    _write_key(key_path, key)
    _write_cert(cert_path, cert)
    return cert_path, key_path


def subject_alternative_names(names: list[str]) -> list[x509.GeneralName]:
    """IP addresses as IP SANs, anything else as a DNS name (Go's TLS checks both kinds)."""
    result: list[x509.GeneralName] = []
    for name in names:
        try:
            result.append(x509.IPAddress(ipaddress.ip_address(name)))
        except ValueError:
            result.append(x509.DNSName(name))
    return result


def issue(
    ca_folder: Path,
    out_folder: Path,
    common_name: str,
    *,
    server_names: list[str] | None = None,
    client: bool = False,
    cert_file: str = "cert.pem",
    key_file: str = "key.pem",
) -> tuple[Path, Path]:
    """Issue a server certificate (valid for server_names: IPs or host names) or a client
    certificate signed by the CA in ca_folder; write it, its key and ca.pem into out_folder
    and return the certificate and key paths."""
    ca_cert = x509.load_pem_x509_certificate((ca_folder / "ca.pem").read_bytes())
    ca_key = serialization.load_pem_private_key((ca_folder / "ca-key.pem").read_bytes(), None)
    if not isinstance(ca_key, ec.EllipticCurvePrivateKey):  # ensure_ca() makes EC keys only
        raise ValueError(f"{ca_folder / 'ca-key.pem'} is not an EC private key")
    private_folder(out_folder)
    key = ec.generate_private_key(ec.SECP256R1())
    usage = ExtendedKeyUsageOID.CLIENT_AUTH if client else ExtendedKeyUsageOID.SERVER_AUTH
    builder = (
        _builder(_name(common_name), ca_cert.subject, key.public_key())
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
    )
    if server_names:
        builder = builder.add_extension(
            x509.SubjectAlternativeName(subject_alternative_names(server_names)), critical=False
        )
    cert = builder.sign(ca_key, hashes.SHA256())
    cert_path, key_path = out_folder / cert_file, out_folder / key_file
    _write_key(key_path, key)
    _write_cert(cert_path, cert)
    (out_folder / "ca.pem").write_bytes((ca_folder / "ca.pem").read_bytes())
    return cert_path, key_path


def certificate_expiry(path: Path) -> dt.datetime | None:
    """When the PEM certificate at path stops being valid; None if it is missing or unreadable."""
    try:
        return x509.load_pem_x509_certificate(path.read_bytes()).not_valid_after_utc
    except (OSError, ValueError):
        return None


@dataclass(frozen=True)
class TlsStatus:
    """What can be said about a tls_dir without showing any of it: which files are there and
    when the certificates expire (the earlier of ours and the CA's)."""

    folder: str
    missing: list[str] = field(default_factory=list)
    expires: dt.datetime | None = None

    @property
    def complete(self) -> bool:
        return bool(self.folder) and not self.missing


def tls_status(tls_dir: str) -> TlsStatus:
    if not tls_dir:
        return TlsStatus("", list(CLIENT_FILES))
    folder = Path(tls_dir)
    missing = [name for name in CLIENT_FILES if not (folder / name).is_file()]
    expiries = [certificate_expiry(folder / name) for name in ("cert.pem", "ca.pem")]
    known = [expiry for expiry in expiries if expiry is not None]
    return TlsStatus(tls_dir, missing, min(known) if known else None)


# ---------------------------------------------------------------- the portal's own CA


def portal_ca_dir() -> Path:
    return Path(settings.PKI_DIR) / "ca"


def portal_client_dir() -> Path:
    """The tls_dir of every node whose certificate the portal CA issued."""
    return Path(settings.PKI_DIR) / "client"


def ensure_portal_client() -> Path:
    """The portal CA and its client certificate, created on first use; returns the folder
    (ca.pem, cert.pem, key.pem) to use as the nodes' tls_dir."""
    private_folder(Path(settings.PKI_DIR))
    ensure_ca(portal_ca_dir(), f"Platter CA ({settings.PLATTER_SITE})")
    client = portal_client_dir()
    if not all((client / name).is_file() for name in CLIENT_FILES):
        issue(portal_ca_dir(), client, f"{settings.PLATTER_SITE} portal", client=True)
    return client


def issue_node_certificate(node: str, addresses: list[str], out_folder: Path) -> Path:
    """The node's server certificate for its addresses, signed by the portal CA, written with
    its key and the CA as NODE_FILES into out_folder (to be copied to the node)."""
    ensure_portal_client()
    issue(
        portal_ca_dir(),
        out_folder,
        node,
        server_names=addresses,
        cert_file="server-cert.pem",
        key_file="server-key.pem",
    )
    return out_folder


def describe_credentials(transport: str, tls_dir: str) -> str:
    """One line about a node's credentials for the admin: where they are, whether they are
    all there and until when they are valid; never their contents."""
    if transport == "ssh":
        return "ssh: key and known host key come from the ssh client's config (not in Platter)"
    if transport != "tcp":
        return "local socket: no credentials"
    status = tls_status(tls_dir)
    if not status.folder:
        return "no tls_dir: this node cannot be reached"
    if status.missing:
        return f"{status.folder}: MISSING {', '.join(status.missing)}"
    until = f"valid until {status.expires:%Y-%m-%d}" if status.expires else "unreadable"
    return f"{status.folder}: {', '.join(CLIENT_FILES)} present; certificates {until}"
