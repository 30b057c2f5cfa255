"""Node drivers: one way to reach a node's Docker Engine API, whatever the transport.

unix:// for a local node, tcp:// always with mutual TLS (the node's certificate is verified
against the CA in the node's tls_dir and ours is presented), ssh:// through docker's ssh
transport (the ssh client's config supplies key and known hosts). Clients are cached per node
and per process because an SSH connection costs most of a second.
"""

import threading
from pathlib import Path

import docker
from django.conf import settings
from docker.tls import TLSConfig

from apps.inventory.models import Node

_clients: dict[tuple[int, str], docker.DockerClient] = {}
_lock = threading.Lock()


def tls_config(tls_dir: str | Path) -> TLSConfig:
    folder = Path(tls_dir)
    return TLSConfig(
        client_cert=(str(folder / "cert.pem"), str(folder / "key.pem")),
        ca_cert=str(folder / "ca.pem"),
        verify=True,
    )


def connect(endpoint: str, tls_dir: str = "", timeout: int | None = None) -> docker.DockerClient:
    """A new client for an endpoint; tcp:// without TLS material is refused on purpose."""
    options = {
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


def client_for(node: Node) -> docker.DockerClient:
    """The cached client of a node; a changed endpoint gets a fresh one."""
    key = (node.pk, node.endpoint)
    with _lock:
        client = _clients.get(key)
    if client is None:
        client = connect(node.endpoint, node.tls_dir)
        with _lock:
            _clients[key] = client
    return client


def forget(node: Node) -> None:
    """Drop a node's cached client, e.g. after its daemon restarted."""
    with _lock:
        for key in [k for k in _clients if k[0] == node.pk]:
            _clients.pop(key).close()


def ensure_macvlan_network(
    client: docker.DockerClient, name: str, subnet: str, gateway: str, parent: str
) -> None:
    """Create the cluster network on a node on first use; an existing one is kept."""
    if client.networks.list(names=[name]):
        return
    ipam = docker.types.IPAMConfig(
        pool_configs=[docker.types.IPAMPool(subnet=subnet, gateway=gateway)]
    )
    client.networks.create(name, driver="macvlan", ipam=ipam, options={"parent": parent})


def throttle_options(disks: list) -> dict:
    """blkio throttles for a container from its disks' caps (the lab uses them to emulate
    spindles; admins use them to keep one instance from saturating a shared controller)."""
    options: dict[str, list[dict]] = {}
    for disk in disks:
        if not disk.device:
            continue
        for key, rate in (("device_write_bps", disk.write_bps), ("device_read_bps", disk.read_bps)):
            if rate:
                options.setdefault(key, []).append({"Path": disk.device, "Rate": int(rate)})
    return options
