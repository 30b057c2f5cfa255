"""Keeping a proxied UI's links inside the proxy: absolute paths in HTML attributes and CSS
url(), and Location headers. Products that know their public prefix (Spark's reverseProxyUrl)
already write links under it; those are left as they are."""

import re
from collections.abc import Iterable, Iterator
from urllib.parse import urlsplit

# Enough bytes held back between chunks for any match and its look-ahead to be complete.
HOLD_BACK = 512


def link_pattern(cluster_root: str) -> re.Pattern[bytes]:
    """href=, src=, action= and url( followed by a "/" path (not "//host", and not a path
    already under this cluster's proxy root)."""
    root = re.escape(cluster_root.lstrip("/").encode())
    return re.compile(
        rb"((?:\b(?:href|src|action|formaction)\s*=\s*|\burl\(\s*)[\"']?)/(?!/)(?!" + root + rb"/)",
        re.IGNORECASE,
    )


class LinkRewriter:
    """Rewrites a body chunk by chunk: each chunk goes out as soon as what follows it cannot
    change a match, so a large page streams instead of being buffered whole."""

    def __init__(self, pattern: re.Pattern[bytes], prefix: str) -> None:
        self.pattern = pattern
        self.prefix = prefix.encode()
        self._buffer = b""

    def feed(self, chunk: bytes) -> bytes:
        self._buffer += chunk
        return self._emit(len(self._buffer) - HOLD_BACK)

    def flush(self) -> bytes:
        return self._emit(len(self._buffer))

    def _emit(self, cut: int) -> bytes:
        buffer = self._buffer
        if cut <= 0:
            return b""
        out, pos = bytearray(), 0
        for match in self.pattern.finditer(buffer):
            if match.start() >= cut:
                break
            out += buffer[pos : match.start()] + match.group(1) + self.prefix + b"/"
            pos = match.end()
        end = max(cut, pos)
        out += buffer[pos:end]
        self._buffer = buffer[end:]
        return bytes(out)

    def rewrite(self, chunks: Iterable[bytes]) -> Iterator[bytes]:
        for chunk in chunks:
            if out := self.feed(chunk):
                yield out
        if out := self.flush():
            yield out


def rewrite_location(
    value: str, prefix: str, cluster_root: str, members: dict[str, str], own_origin: str = ""
) -> str | None:
    """The Location an upstream redirect should have through the proxy, or None when it
    points outside the cluster (the proxy never sends a browser to a private address).

    members maps every member's hostname and address to its hostname; prefix is this UI's
    proxy path, cluster_root the cluster's (both without a trailing slash); own_origin the
    origin UIs are served on when it is not the portal's (PROXY_ORIGIN)."""
    if own_origin and value.startswith(f"{own_origin}{cluster_root}/"):
        return value
    url = urlsplit(value)
    if not url.scheme and not url.netloc:
        if value.startswith("/") and not value.startswith(cluster_root + "/"):
            return prefix + value
        return value  # relative, or already a proxy path
    if url.scheme not in ("http", "https", ""):
        return None
    hostname = members.get((url.hostname or "").lower())
    if hostname is None:
        return None
    try:
        port = url.port or (443 if url.scheme == "https" else 80)
    except ValueError:
        return None
    rest = (url.path or "/") + (f"?{url.query}" if url.query else "")
    return f"{cluster_root}/{hostname}/{port}{rest}"
