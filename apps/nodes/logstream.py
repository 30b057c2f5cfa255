"""A container's log followed on the event loop: the Engine API's logs endpoint read with
httpx's async client, so a follow waits without holding a thread (issue 29).

unix:// and tcp:// (mutual TLS, verified against the node's CA) endpoints are read this way;
an ssh:// node has no async transport here, so its follow reads the docker SDK's stream in a
thread, one read at a time.
"""

import codecs
import functools
import ssl
import struct
import time
from collections.abc import AsyncIterator
from pathlib import Path
from urllib.parse import quote

import httpx
from django.conf import settings

from .engine import Endpoint
from .errors import NodeMissing, NodeRefused, NodeUnreachable

HEADER = struct.Struct(">BxxxL")  # stream (1 stdout, 2 stderr), then the frame's length


@functools.lru_cache(maxsize=64)
def _tls_context(tls_dir: str) -> ssl.SSLContext:
    """The node's CA and our client certificate, read once per process: reading them for
    every follow would block the event loop on files and key parsing each time."""
    folder = Path(tls_dir)
    context = ssl.create_default_context(cafile=str(folder / "ca.pem"))
    context.load_cert_chain(str(folder / "cert.pem"), str(folder / "key.pem"))
    return context


def _client(node: Endpoint) -> tuple[httpx.AsyncClient, str]:
    timeout = httpx.Timeout(settings.NODE_API_TIMEOUT, read=None)  # the follow's deadline rules
    endpoint = node.endpoint
    if endpoint.startswith("unix://"):
        transport = httpx.AsyncHTTPTransport(uds=endpoint.removeprefix("unix://"))
        base = "http://docker"
    elif endpoint.startswith("tcp://"):
        transport = httpx.AsyncHTTPTransport(verify=_tls_context(node.tls_dir))
        base = "https://" + endpoint.removeprefix("tcp://")
    else:
        raise ValueError(f"{endpoint}: no async transport")
    client = httpx.AsyncClient(transport=transport, timeout=timeout, trust_env=False)
    return client, f"{base}/v{settings.NODE_API_VERSION}"


def can_follow_async(node: Endpoint) -> bool:
    return node.endpoint.startswith(("unix://", "tcp://"))


async def follow(
    node: Endpoint,
    container: str,
    tail: int,
    seconds: float,
    *,
    since: float | None = None,
    timestamps: bool = False,
) -> AsyncIterator[str]:
    """The last `tail` lines (of those at or after `since`), then new output as the container
    writes it, as text, for at most `seconds` (the reader's deadline cuts it too). NodeMissing
    when there is no such container, NodeRefused / NodeUnreachable as the other calls."""
    client, base = _client(node)
    where = f"{base}/containers/{quote(container, safe='')}"
    params: dict[str, str | int | float] = {
        "follow": 1,
        "stdout": 1,
        "stderr": 1,
        "tail": tail,
        "timestamps": int(timestamps),
        "until": int(time.time() + seconds) + 1,
    }
    if since is not None:
        params["since"] = f"{since:.6f}"
    what = f"follow the log of {container}"
    try:
        try:
            info = await client.get(f"{where}/json")
            _check(node, info, what)
            tty = bool(info.json().get("Config", {}).get("Tty"))
            async with client.stream("GET", f"{where}/logs", params=params) as response:
                if response.status_code >= 400:
                    await response.aread()
                _check(node, response, what)
                decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
                # As each read comes (httpcore reads at most 64 KiB at a time); a chunk size
                # would hold lines back until that many bytes had come.
                chunks = response.aiter_raw()
                async for payload in chunks if tty else _frames(chunks):
                    if text := decoder.decode(payload):
                        yield text
                if rest := decoder.decode(b"", final=True):
                    yield rest
        except httpx.TransportError as error:
            raise NodeUnreachable(node.name, f"{what}: did not answer ({error!r})") from None
    finally:
        await client.aclose()


def _check(node: Endpoint, response: httpx.Response, what: str) -> None:
    if response.status_code == 404:
        raise NodeMissing(node.name, f"{what}: no such container")
    if response.status_code >= 400:
        detail = response.text[:500]
        raise NodeRefused(node.name, f"{what}: {detail}", transient=response.status_code >= 500)


async def _frames(chunks: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
    """The payloads of Docker's multiplexed stream (8-byte header, then that many bytes),
    each given out in pieces as they come: a frame's length never sizes a buffer."""
    header = b""
    left = 0  # payload bytes of the current frame still to come
    async for chunk in chunks:
        view = memoryview(chunk)
        while view:
            if left:
                piece, view = view[:left], view[left:]
                left -= len(piece)
                yield bytes(piece)
                continue
            need = HEADER.size - len(header)
            header += bytes(view[:need])
            view = view[need:]
            if len(header) == HEADER.size:
                _, left = HEADER.unpack(header)
                header = b""
