"""Typed node errors: what went wrong on a node, in words a user or an admin can act on.

`transient` says whether a retry (later, or on another node) may help: a node that did not
answer or had a server error may; a refused spec, a missing image or a name conflict will not.
"""


class NodeError(Exception):
    """A node could not do what was asked; the message names the node and what was done."""

    transient = False

    def __init__(self, node: str, message: str, transient: bool | None = None) -> None:
        super().__init__(f"node {node}: {message}")
        self.node, self.message = node, message
        if transient is not None:
            self.transient = transient


class NodeUnreachable(NodeError):
    """The node did not answer (connection refused or reset, timeout, transport failure)."""

    transient = True


class NodeRefused(NodeError):
    """The node answered and refused (a 4xx of the Engine API); a 5xx is transient."""


class NodeMissing(NodeRefused):
    """The node has no such container, image or exec."""


class NodeConflict(NodeRefused):
    """The name is taken (e.g. a container an earlier try made)."""


class NotAFile(NodeRefused):
    """A path in a container that is there but is not a regular file (a folder, a symbolic
    link, a device...), or has such a thing among the folders above it."""

    def __init__(self, node: str, path: str, kind: str) -> None:
        super().__init__(node, f"{path} is {kind}, not a regular file")
        self.path, self.kind = path, kind
