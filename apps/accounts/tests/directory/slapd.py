"""A private OpenLDAP server (Debian's slapd) for the tests: its own configuration, database,
port and TLS certificate (StartTLS) under a temporary folder, filled with ldapadd, stopped and
gone afterwards."""

import datetime
import ipaddress
import shutil
import socket
import subprocess
import time
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

SUFFIX = "dc=example,dc=org"
ROOT_DN = f"cn=admin,{SUFFIX}"
ROOT_PASSWORD = "root-secret"  # the test directory's own, never a real one
SERVICE_DN = f"cn=platter,ou=services,{SUFFIX}"
SERVICE_PASSWORD = "service-secret"
SCHEMAS = ("core", "cosine", "inetorgperson", "nis")

# Passwords are readable by nobody and usable to bind; everything else is readable by whoever
# is bound (the portal's service account), never anonymously: the portal must use its account.
CONFIG = """\
{includes}
pidfile {root}/slapd.pid
modulepath /usr/lib/ldap
moduleload back_mdb
database mdb
maxsize 16777216
suffix "{suffix}"
rootdn "{root_dn}"
rootpw {root_password}
directory {root}/data
TLSCACertificateFile {root}/ca.pem
TLSCertificateFile {root}/server.pem
TLSCertificateKeyFile {root}/server.key
access to attrs=userPassword by anonymous auth by * none
access to * by users read by * none
"""


class SlapdError(RuntimeError):
    pass


def _write_certificates(root: Path) -> None:
    """A CA of the test's own and a certificate it signed for 127.0.0.1, for StartTLS."""
    now = datetime.datetime.now(datetime.UTC)

    def certificate(subject: str, key, issuer: str, issuer_key, ca: bool):
        builder = (
            x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)]))
            .issuer_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, issuer)]))
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
        )
        if not ca:
            names = [x509.IPAddress(ipaddress.ip_address("127.0.0.1")), x509.DNSName("localhost")]
            builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=False)
        return builder.sign(issuer_key, hashes.SHA256())

    ca_key = ec.generate_private_key(ec.SECP256R1())
    server_key = ec.generate_private_key(ec.SECP256R1())
    ca = certificate("Platter test directory CA", ca_key, "Platter test directory CA", ca_key, True)
    server = certificate("127.0.0.1", server_key, "Platter test directory CA", ca_key, False)
    (root / "ca.pem").write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    (root / "server.pem").write_bytes(server.public_bytes(serialization.Encoding.PEM))
    key_file = root / "server.key"
    key_file.write_bytes(
        server_key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    key_file.chmod(0o600)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _tool(name: str) -> str:
    found = shutil.which(name) or shutil.which(name, path="/usr/sbin:/usr/bin")
    if not found:
        raise SlapdError(f"{name} is missing: install Debian's slapd and ldap-utils")
    return found


class Slapd:
    """One running slapd. `add` and `modify` take LDIF, as ldapadd/ldapmodify do."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.port = _free_port()
        self.uri = f"ldap://127.0.0.1:{self.port}/"
        self.ca_file = root / "ca.pem"  # the CA of the server's certificate (StartTLS)
        self.process: subprocess.Popen | None = None

    def start(self, ready_within: float = 30) -> None:
        (self.root / "data").mkdir(parents=True)
        _write_certificates(self.root)
        includes = "\n".join(f"include /etc/ldap/schema/{name}.schema" for name in SCHEMAS)
        config = self.root / "slapd.conf"
        config.write_text(
            CONFIG.format(
                includes=includes,
                root=self.root,
                suffix=SUFFIX,
                root_dn=ROOT_DN,
                root_password=ROOT_PASSWORD,
            )
        )
        log = (self.root / "slapd.log").open("wb")
        # -d 0: stay in the foreground (a child we can stop), logging nothing but errors.
        self.process = subprocess.Popen(
            [_tool("slapd"), "-f", str(config), "-h", self.uri, "-d", "0"],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + ready_within
        while self._whoami().returncode != 0:
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise SlapdError(f"slapd did not start: {(self.root / 'slapd.log').read_text()}")
            time.sleep(0.05)

    def _whoami(self) -> subprocess.CompletedProcess:
        return subprocess.run(
            [_tool("ldapwhoami"), "-x", "-H", self.uri, "-D", ROOT_DN, "-w", ROOT_PASSWORD],
            capture_output=True,
            check=False,
        )

    def _ldif(self, tool: str, ldif: str) -> None:
        result = subprocess.run(
            [_tool(tool), "-x", "-H", self.uri, "-D", ROOT_DN, "-w", ROOT_PASSWORD],
            input=ldif.encode(),
            capture_output=True,
            check=False,
        )
        if result.returncode != 0:
            raise SlapdError(f"{tool} failed: {result.stderr.decode()}")

    def add(self, ldif: str) -> None:
        self._ldif("ldapadd", ldif)

    def modify(self, ldif: str) -> None:
        self._ldif("ldapmodify", ldif)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.process = None
