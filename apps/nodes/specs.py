"""What the node layer is asked to run: a container spec, without any Docker API types."""

import hashlib
import json
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from .engine import Endpoint

# The node a spec runs on: to the layer only an Endpoint; to the apps that make specs and read
# them back (apps/clusters/container_specs.py, the workers) their inventory Node.
NodeT = TypeVar("NodeT", bound=Endpoint)

# Docker's log driver would otherwise let a chatty product fill the node's root disk.
LOG_DRIVER = "json-file"
LOG_OPTIONS = {"max-size": "10m", "max-file": "3"}


@dataclass
class ContainerSpec(Generic[NodeT]):
    """One instance's container: reserved cores and memory, its own disks (binds), its address
    on the cluster's network, its members in /etc/hosts, and nothing more."""

    instance_id: int
    node: NodeT
    name: str
    image: str
    hostname: str
    address: str
    network: str  # the Docker network on the node (the cluster's segment)
    command: list[str] | None
    environment: dict[str, str]
    labels: dict[str, str]
    cores: int
    memory_mb: int
    binds: list[str]
    capabilities: list[str]
    extra_hosts: dict[str, str]
    user: str = ""
    throttles: dict = field(default_factory=dict)

    def fingerprint(self) -> str:
        """Changes whenever the container would be created differently (e.g. re-placed with
        another address or disks), so an old container is replaced rather than reused."""
        parts = [
            self.image,
            self.command,
            self.environment,
            self.address,
            self.network,
            self.binds,
            self.cores,
            self.memory_mb,
            self.capabilities,
            self.extra_hosts,
            self.user,
        ]
        return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()[:16]


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
