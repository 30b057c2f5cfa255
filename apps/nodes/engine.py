"""Reaching a node's Docker Engine API, whatever the transport, and sorting its errors.

unix:// for a local node, tcp:// always with mutual TLS (the node's certificate is verified
against the CA in the node's tls_dir and ours is presented), ssh:// through docker's ssh
transport (the ssh client's config supplies key and known hosts). Clients are cached per
endpoint and per process because an SSH connection costs most of a second.
"""

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, TypeVar

import docker
import requests
from django.conf import settings
from docker.errors import APIError, DockerException, ImageNotFound, NotFound
from docker.tls import TLSConfig

from .errors import NodeConflict, NodeError, NodeMissing, NodeRefused, NodeUnreachable

log = logging.getLogger(__name__)
T = TypeVar("T")


class Endpoint(Protocol):
    """What the node layer needs of a node: an inventory Node, or an Address (read only, so
    a frozen Address is one too)."""

    @property
    def name(self) -> str: ...
    @property
    def endpoint(self) -> str: ...
    @property
    def tls_dir(self) -> str: ...


@dataclass(frozen=True)
class Address:
    """A node that has no inventory row: the lab's daemons over their local sockets, the
    engine that builds product images. `timeout` (seconds per call) replaces
    NODE_API_TIMEOUT, e.g. for image builds."""

    name: str
    endpoint: str
    tls_dir: str = ""
    timeout: int = 0


def classify(node: str, error: Exception, what: str = "") -> NodeError:
    """A docker SDK or transport error as a typed NodeError; anything else is a bug and is
    raised as it is."""
    prefix = f"{what}: " if what else ""
    if isinstance(error, NodeError):
        return error
    if isinstance(error, (NotFound, ImageNotFound)):
        return NodeMissing(node, prefix + _detail(error))
    if isinstance(error, APIError):  # before OSError: requests' errors are OSErrors too
        detail = _detail(error)
        if error.status_code == 409:
            return NodeConflict(node, prefix + detail)
        return NodeRefused(node, prefix + detail, transient=error.is_server_error())
    if isinstance(error, (requests.ConnectionError, requests.Timeout, OSError)):
        return NodeUnreachable(node, f"{prefix}did not answer ({type(error).__name__}: {error})")
    if isinstance(error, DockerException):
        return NodeUnreachable(node, prefix + str(error))
    raise error


def _detail(error: APIError) -> str:
    detail = error.explanation or str(error)
    return detail.decode(errors="replace") if isinstance(detail, bytes) else str(detail)


def call(node: Endpoint, action: Callable[[], T], what: str) -> T:
    """Run one Engine API action, retrying transient errors a few times with a short back-off;
    raises a NodeError naming the node and what was being done."""
    tries = settings.NODE_API_RETRIES
    for attempt in range(1, tries + 1):
        try:
            return action()
        except Exception as error:
            failure = classify(node.name, error, what)
            if not failure.transient or attempt == tries:
                raise failure from error
            log.warning("node %s: %s failed (%s); retrying", node.name, what, failure.message)
            time.sleep(0.2 * attempt)
    raise AssertionError("unreachable")


def tls_config(tls_dir: str | Path) -> TLSConfig:
    folder = Path(tls_dir)
    return TLSConfig(
        client_cert=(str(folder / "cert.pem"), str(folder / "key.pem")),
        ca_cert=str(folder / "ca.pem"),
        verify=True,
    )


def connect(endpoint: str, tls_dir: str = "", timeout: int | None = None) -> docker.DockerClient:
    """A new client for an endpoint; tcp:// without TLS material is refused on purpose."""
    options: dict[str, Any] = {
        "timeout": timeout or settings.NODE_API_TIMEOUT,
        "version": settings.NODE_API_VERSION,
    }
    if endpoint.startswith("tcp://"):
        if not tls_dir:
            raise ValueError(f"{endpoint}: tcp:// nodes need TLS material (tls_dir is empty)")
        client = docker.DockerClient(base_url=endpoint, tls=tls_config(tls_dir), **options)
    elif endpoint.startswith("ssh://"):
        client = docker.DockerClient(base_url=endpoint, use_ssh_client=True, **options)
    elif endpoint.startswith("unix://"):
        client = docker.DockerClient(base_url=endpoint, **options)
    else:
        raise ValueError(
            f"unsupported Docker endpoint {endpoint!r} (use unix://, tcp:// or ssh://)"
        )
    # requests would let REQUESTS_CA_BUNDLE replace the node CA and HTTP(S)_PROXY reroute node
    # traffic; a node is verified against its own CA only and reached directly.
    client.api.trust_env = False
    return client


_clients: dict[tuple[str, str, int], docker.DockerClient] = {}
_lock = threading.Lock()


def cached(node: Endpoint) -> docker.DockerClient:
    """The cached client of an endpoint; a changed endpoint gets a fresh one."""
    timeout = getattr(node, "timeout", 0) or 0
    key = (node.endpoint, node.tls_dir or "", timeout)
    with _lock:
        client = _clients.get(key)
    if client is None:
        client = connect(node.endpoint, node.tls_dir, timeout or None)
        with _lock:
            client = _clients.setdefault(key, client)
    return client


def forget(node: Endpoint) -> None:
    """Drop an endpoint's cached client, e.g. after its daemon restarted."""
    with _lock:
        keys = [k for k in _clients if k[:2] == (node.endpoint, node.tls_dir or "")]
        dropped = [_clients.pop(key) for key in keys]
    for client in dropped:
        client.close()
