"""Node drivers: one way to reach a node's Docker Engine API, whatever the transport.

unix:// for a local node, tcp:// always with mutual TLS (the node's certificate is verified
against the CA in the node's tls_dir and ours is presented), ssh:// through docker's ssh
transport (the ssh client's config supplies key and known hosts). Clients are cached per node
and per process because an SSH connection costs most of a second.
"""

import codecs
import io
import logging
import tarfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

import docker
import requests
from django.conf import settings
from docker.errors import APIError, DockerException, ImageNotFound, NotFound
from docker.tls import TLSConfig

from apps.inventory.models import Node

log = logging.getLogger(__name__)
T = TypeVar("T")


class NodeError(Exception):
    """A node could not do what was asked. `transient` errors (the node did not answer, timed
    out, or had a server error) may go away on a retry or on another node; permanent ones (a
    missing image, a refused spec) will not, and their message says what to fix."""

    def __init__(self, node: str, message: str, transient: bool) -> None:
        super().__init__(f"node {node}: {message}")
        self.node, self.message, self.transient = node, message, transient


def classify(node: str, error: Exception) -> NodeError:
    """Sort a docker SDK / transport error into transient or permanent."""
    if isinstance(error, NodeError):
        return error
    if isinstance(error, APIError):  # before OSError: requests' errors are OSErrors too
        detail = error.explanation or str(error)
        if isinstance(detail, bytes):
            detail = detail.decode(errors="replace")
        return NodeError(node, detail, transient=error.is_server_error())
    if isinstance(error, (requests.ConnectionError, requests.Timeout, OSError)):
        return NodeError(node, f"did not answer ({type(error).__name__}: {error})", True)
    if isinstance(error, DockerException):
        return NodeError(node, str(error), transient=True)
    raise error  # a bug on our side, not a node problem


def call(node: Node, action: Callable[[], T], what: str) -> T:
    """Run one Engine API action against a node, retrying transient errors a few times with a
    short back-off; raises NodeError naming the node and what was being done."""
    tries = settings.NODE_API_RETRIES
    for attempt in range(1, tries + 1):
        try:
            return action()
        except (NotFound, ImageNotFound):
            raise  # callers decide what a missing object means
        except Exception as error:
            failure = classify(node.name, error)
            if not failure.transient or attempt == tries:
                raise NodeError(
                    node.name, f"{what}: {failure.message}", failure.transient
                ) from error
            log.warning("node %s: %s failed (%s); retrying", node.name, what, failure.message)
            time.sleep(0.2 * attempt)
    raise AssertionError("unreachable")


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


def ensure_image(node: Node, image: str) -> None:
    """Use the node's copy of the image, else pull it; a failed pull names image and node."""
    client = client_for(node)
    try:
        call(node, lambda: client.api.inspect_image(image), f"inspect image {image}")
        return
    except (NotFound, ImageNotFound):
        pass
    try:  # the SDK splits off the tag (or digest) itself, defaulting to latest
        call(node, lambda: client.api.pull(image), f"pull {image}")
    except (NotFound, ImageNotFound, NodeError) as error:
        reason = getattr(error, "message", None) or str(error)
        raise NodeError(
            node.name, f"image {image} is not on the node and could not be pulled: {reason}",
            transient=False,
        ) from error  # fmt: skip


def image_references(node: Node) -> list[str]:
    """Every "repo:tag" the node holds, sorted."""
    api = client_for(node).api
    return repo_tags(call(node, lambda: api.images(), "list images"))


def repo_tags(images: list[dict]) -> list[str]:
    """The "repo:tag" names in an Engine API image listing (untagged images have none)."""
    return sorted({t for i in images for t in i.get("RepoTags") or [] if t != "<none>:<none>"})


# Output of a command run in a container goes to a file in the container's /tmp: reading it
# back is a plain HTTP request, while attaching to an exec needs a hijacked connection that
# docker's ssh:// transport breaks (BrokenPipeError).
EXEC_OUTPUT = "/tmp/.platter-exec-{}"  # noqa: S108 (inside the container, one file per run)


def run_in_container(
    node: Node, container: str, argv: list[str], timeout: float
) -> tuple[int, str]:
    """Run argv in a running container (which needs a POSIX sh); returns the exit code and
    the output, or raises TimeoutError when it runs longer than `timeout` seconds."""
    api = client_for(node).api
    output_file = EXEC_OUTPUT.format(uuid.uuid4().hex[:12])
    wrapped = ["sh", "-c", f'"$@" >{output_file} 2>&1', "platter-exec", *argv]
    what = f"exec in {container}"
    # An exec starts only once: when the start fails (runc refuses execs into a container
    # whose process is just starting), a new exec is made rather than the same one retried
    # (which answers "already run").
    created = call(node, lambda: api.exec_create(container, wrapped), what)
    for attempt in range(1, settings.NODE_API_RETRIES + 1):
        try:
            api.exec_start(created["Id"], detach=True)
            break
        except Exception as error:
            if attempt == settings.NODE_API_RETRIES:
                failure = classify(node.name, error)
                raise NodeError(
                    node.name, f"{what}: {failure.message}", failure.transient
                ) from error
            log.warning("node %s: %s failed (%s); a new exec", node.name, what, error)
            time.sleep(0.2 * attempt)
            created = call(node, lambda: api.exec_create(container, wrapped), what)
    deadline = time.monotonic() + timeout
    pause = 0.02
    while True:
        state = call(node, lambda: api.exec_inspect(created["Id"]), what)
        if not state["Running"]:
            break
        if time.monotonic() > deadline:
            raise TimeoutError(f"{argv[0]} ran longer than {timeout:.0f} s in {container}")
        time.sleep(pause)
        pause = min(pause * 2, 0.5)
    stream, _ = call(node, lambda: api.get_archive(container, output_file), "read exec output")
    with tarfile.open(fileobj=io.BytesIO(b"".join(stream))) as archive:
        member = archive.extractfile(archive.getmembers()[0])
        output = member.read().decode(errors="replace") if member else ""
    return state["ExitCode"], output


def run_helper(
    node: Node,
    command: list[str],
    binds: list[str],
    capabilities: tuple[str, ...] = (),
    *,
    image: str = "",
    entrypoint: list[str] | None = None,
    host_options: dict | None = None,
) -> tuple[int, str]:
    """Run a short-lived helper container (our own small image unless `image` names another,
    no network, only the given binds) to completion; returns its exit code and output. Used
    for disk discovery, wipes and disk benchmarks (which add blkio throttles: host_options)."""
    client = client_for(node)
    image = image or settings.NODE_HELPER_IMAGE
    ensure_image(node, image)
    api = client.api
    host_config = api.create_host_config(
        binds=binds, network_mode="none", cap_drop=["ALL"], cap_add=list(capabilities),
        security_opt=["no-new-privileges"], pids_limit=64, **(host_options or {}),
    )  # fmt: skip
    name = f"platter-helper-{uuid.uuid4().hex[:12]}"
    labels = {"platter.site": settings.PLATTER_SITE, "platter.helper": "1"}
    container = call(
        node,
        lambda: api.create_container(
            image, command, name=name, labels=labels, host_config=host_config, detach=True,
            entrypoint=entrypoint,
        ),
        "create a helper container",
    )  # fmt: skip
    try:
        call(node, lambda: api.start(container["Id"]), "start a helper container")
        # The SDK's wait has no timeout of its own: a helper stuck on a hung disk would hold
        # its worker slot for good.
        status = call(
            node, lambda: api.wait(container["Id"], timeout=settings.NODE_HELPER_TIMEOUT),
            "wait for a helper container",
        )  # fmt: skip
        output = api.logs(container["Id"], stdout=True, stderr=True).decode(errors="replace")
        return status.get("StatusCode", -1), output
    finally:
        try:
            api.remove_container(container["Id"], force=True)
        except Exception:  # noqa: BLE001 (the reconciler removes leftovers)
            log.warning("node %s: could not remove helper %s", node.name, name)


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


def container_status(node: Node, container: str) -> str | None:
    """The container's state as Docker names it ("running", "exited", ...); None when the
    node has no such container."""
    api = client_for(node).api
    try:
        info = call(node, lambda: api.inspect_container(container), f"inspect {container}")
    except NotFound:
        return None
    return info["State"]["Status"]


def container_log(
    node: Node, container: str, tail: int, *, since: float | None = None,
    timestamps: bool = False,
) -> str:  # fmt: skip
    """The last `tail` lines of a container's log (stdout and stderr in the order written),
    only those at or after `since` (seconds since the epoch) when given. NotFound when the
    node has no such container."""
    api = client_for(node).api
    options: dict = {"tail": tail, "timestamps": timestamps}
    if since is not None:
        options["since"] = since
    raw = call(node, lambda: api.logs(container, **options), f"read the log of {container}")
    return raw.decode(errors="replace")


def follow_container_log(
    node: Node, container: str, tail: int, seconds: float, *, since: float | None = None,
    timestamps: bool = False,
) -> Iterator[str]:  # fmt: skip
    """The last `tail` lines (of those at or after `since`, when given), then new output as
    the container writes it, for at most `seconds`, or until the container stops. NotFound
    when there is no container.

    The daemon checks `until` only when a line comes, and the SDK reads the stream without a
    timeout, so a timer cuts the stream when time is up. The stream has a client of its own:
    cutting it leaves the node's cached client and its pooled connections alone."""
    client = connect(node.endpoint, node.tls_dir)
    api = client.api
    options: dict = {"tail": tail, "timestamps": timestamps, "until": time.time() + seconds}
    if since is not None:
        options["since"] = since
    try:
        stream = call(
            node,
            lambda: api.logs(container, stream=True, follow=True, **options),
            f"follow the log of {container}",
        )
    except BaseException:
        client.close()
        raise
    timer = threading.Timer(seconds, _cut, (stream,))
    timer.daemon = True
    timer.start()
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")  # chunks split characters
    try:
        for chunk in stream:
            if text := decoder.decode(chunk):
                yield text
        if rest := decoder.decode(b"", final=True):
            yield rest
    finally:  # also when the reader left early
        timer.cancel()
        _cut(stream)
        client.close()


def _cut(stream: docker.types.CancellableStream) -> None:
    """End a log stream, from any thread. The SDK's close() shuts the socket down for tcp://
    and unix://, but over ssh:// the "socket" is an ssh process (its file has a `channel`, the
    SDK's SSHSocket), which close() ends."""
    try:
        channel = getattr(stream._response.raw._fp.fp, "channel", None)
        if channel is not None:
            channel.close()
        else:
            stream.close()
    except (AttributeError, OSError, DockerException):  # already ended
        pass
