"""Checking a new node before it joins the pool (manage.py add_node): does its Engine API
answer through our drivers, in a version we speak, and what does it have (cores, memory, OS,
architecture, docker root)? Failures say what to fix: an endpoint nobody listens on, a
certificate from the wrong CA, a tls_dir missing files, an ssh login that does not work.

Messages name files and hosts, never the contents of a key or certificate.
"""

import subprocess
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

import requests
from django.conf import settings
from docker.errors import DockerException
from docker.utils import version_lt

from . import engine, pki

# TLS alerts a node's dockerd sends when it does not accept our client certificate.
CLIENT_REFUSED = ("BAD_CERTIFICATE", "UNKNOWN_CA", "CERTIFICATE_REQUIRED")


class ProbeError(Exception):
    """The node cannot be used as it is; the message says why and what to do."""


@dataclass(frozen=True)
class NodeFacts:
    hostname: str
    server_version: str
    api_version: str
    min_api_version: str
    operating_system: str
    os_type: str
    architecture: str
    docker_root: str
    cores: int
    memory_mb: int


def check_credentials(endpoint: str, tls_dir: str) -> None:
    """Refuse what cannot work before any connection is tried."""
    scheme = endpoint.split("://", 1)[0] if "://" in endpoint else ""
    if scheme not in {"tcp", "ssh", "unix"}:
        raise ProbeError(
            f"endpoint {endpoint!r}: use tcp://HOST:2376 (mutual TLS) or ssh://USER@HOST[:PORT]"
        )
    if scheme != "tcp":
        return
    if not tls_dir:
        raise ProbeError(
            f"{endpoint}: tcp:// nodes are reached with mutual TLS only; give --tls-dir "
            f"(the portal's is {pki.portal_client_dir()}, made by manage.py node_certs)"
        )
    status = pki.tls_status(tls_dir)
    if not Path(tls_dir).is_dir():
        raise ProbeError(f"tls_dir {tls_dir} does not exist")
    if status.missing:
        raise ProbeError(
            f"tls_dir {tls_dir} lacks {', '.join(status.missing)} (the portal's ca.pem, "
            f"cert.pem and key.pem, as manage.py node_certs writes them)"
        )


def explain(endpoint: str, tls_dir: str, error: Exception) -> str:
    """A connection failure in words an admin can act on."""
    text = str(error)
    where = urlsplit(endpoint.replace("tcp://", "https://", 1))
    address = f"{where.hostname}:{where.port}"
    if isinstance(error, requests.exceptions.SSLError):
        if "CERTIFICATE_VERIFY_FAILED" in text and "mismatch" in text:
            return (
                f"TLS verification failed: the node's certificate is not valid for "
                f"{where.hostname}; issue it again with node_certs --address {where.hostname}"
            )
        if "CERTIFICATE_VERIFY_FAILED" in text and "expired" in text:
            return "TLS verification failed: the node's certificate has expired; run node_certs"
        if "CERTIFICATE_VERIFY_FAILED" in text:
            return (
                f"TLS verification failed: the node's certificate is not signed by the CA in "
                f"{tls_dir}/ca.pem (wrong CA: were the node's files issued by this portal's "
                f"node_certs?)"
            )
        if any(
            alert in text for alert in ("BAD_CERTIFICATE", "UNKNOWN_CA", "CERTIFICATE_REQUIRED")
        ):
            return (
                f"TLS verification failed: the node refused our client certificate from "
                f"{tls_dir}/cert.pem (the node trusts another CA: copy this portal's ca.pem to "
                f"the node, or use the tls_dir of the CA that issued the node's certificate)"
            )
        return f"TLS handshake with {address} failed: {text}"
    if isinstance(error, requests.exceptions.Timeout):
        return f"{address} did not answer within {settings.NODE_API_TIMEOUT} s"
    if endpoint.startswith("ssh://"):
        return f"ssh transport failed: {ssh_diagnosis(endpoint)}"
    if "Connection refused" in text:
        return (
            f"nothing listens on {address} (connection refused): is dockerd running there "
            f'with "hosts" including tcp://0.0.0.0:{where.port} and the port open to us?'
        )
    if isinstance(error, requests.exceptions.ConnectionError):
        return f"{address} is unreachable: {text}"
    return text


def ssh_diagnosis(endpoint: str) -> str:
    """What the ssh client says when it logs in the way docker's ssh transport does."""
    where = urlsplit(endpoint)
    command = ["ssh", "-o", "BatchMode=yes", "-o", "ConnectTimeout=10"]
    if where.port:
        command += ["-p", str(where.port)]
    if where.username:
        command += ["-l", where.username]
    command += ["--", where.hostname or "", "docker", "version", "--format", "{{.Server.Version}}"]
    try:
        result = subprocess.run(command, capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired) as error:
        return f"could not run {command[0]}: {error}"
    said = (result.stderr or result.stdout).strip().splitlines()
    if result.returncode == 0:
        return "ssh logs in and docker answers there, but the Engine API did not answer"
    return (
        f"`{' '.join(command[:-2])}` exits {result.returncode}: "
        f"{said[-1] if said else 'no output'} (the node's key and host key must be in the "
        f"ssh client's config of the user running the portal)"
    )


def probe(endpoint: str, tls_dir: str = "") -> NodeFacts:
    """Connect through the node drivers and read what the node has; raises ProbeError."""
    check_credentials(endpoint, tls_dir)
    try:
        with closing(engine.connect(endpoint, tls_dir)) as client:
            # The unversioned /version answers whatever API version the engine speaks.
            version = client.api.version(api_version=False)
            info = client.info()
    except (DockerException, requests.exceptions.RequestException, OSError) as error:
        raise ProbeError(explain(endpoint, tls_dir, error)) from None
    if info.get("OSType") != "linux":
        raise ProbeError(f"the node runs {info.get('OSType')} containers; Platter needs linux")
    pinned = settings.NODE_API_VERSION
    api, oldest = version.get("ApiVersion", "0"), version.get("MinAPIVersion", "0")
    if version_lt(api, pinned):
        raise ProbeError(
            f"the node's Docker {version.get('Version')} speaks Engine API {api}; Platter needs "
            f"{pinned} or newer (Debian 12's docker.io is 20.10, API 1.41)"
        )
    if version_lt(pinned, oldest):
        raise ProbeError(
            f"the node's Docker {version.get('Version')} no longer serves Engine API {pinned} "
            f"(oldest: {oldest}); set PLATTER_NODE_API_VERSION={oldest} for the portal"
        )
    return NodeFacts(
        hostname=info.get("Name", ""),
        server_version=version.get("Version", ""),
        api_version=api,
        min_api_version=oldest,
        operating_system=info.get("OperatingSystem", ""),
        os_type=info.get("OSType", ""),
        architecture=info.get("Architecture", ""),
        docker_root=info.get("DockerRootDir", ""),
        cores=int(info.get("NCPU", 0)),
        memory_mb=int(info.get("MemTotal", 0)) // (1024 * 1024),
    )
