"""A private OpenLDAP server (Debian's slapd) for the tests: its own configuration, database
and port under a temporary folder, filled with ldapadd, stopped and gone afterwards."""

import shutil
import socket
import subprocess
import time
from pathlib import Path

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
access to attrs=userPassword by anonymous auth by * none
access to * by users read by * none
"""


class SlapdError(RuntimeError):
    pass


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
        self.process: subprocess.Popen | None = None

    def start(self, ready_within: float = 30) -> None:
        (self.root / "data").mkdir(parents=True)
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
