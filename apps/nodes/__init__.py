"""The node layer: the one place Platter talks to a node's Docker Engine.

Everything else (the workers' cluster operations, the reconciler, disk discovery and benchmarks,
the logs panel, health checks, the lab) asks a `NodeClient` for what it needs and gets plain
Python values back, or a typed `NodeError`: `NodeUnreachable` (the node did not answer),
`NodeRefused` (it answered no), `NodeMissing` (no such container or image), `NodeConflict` (a
name already taken). Retries, timeouts and transports live here and nowhere else; unit tests
swap the real client for `apps.nodes.fake.FakeNodes`. The portal's certificate authority, whose
certificates the transports present, lives beside them (pki.py).
"""

from .client import NodeClient, client
from .errors import NodeConflict, NodeError, NodeMissing, NodeRefused, NodeUnreachable
from .parallel import parallel

__all__ = [
    "NodeClient",
    "NodeConflict",
    "NodeError",
    "NodeMissing",
    "NodeRefused",
    "NodeUnreachable",
    "client",
    "parallel",
]
