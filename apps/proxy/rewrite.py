"""Keeping a proxied UI's links inside the proxy: absolute paths in HTML attributes and CSS
url(), and Location headers. Products that know their public prefix (Spark's reverseProxyUrl)
already write links under it; those are left as they are."""

import re
from collections.abc import Iterable, Iterator
from urllib.parse import SplitResult, urljoin, urlsplit

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


def without(data: str, secret: str) -> str:
    """``data`` with every ``secret`` cut out, again until none is left (cutting one out may
    join the halves of another around it)."""
    while secret and secret in data:
        data = data.replace(secret, "")
    return data


class Scrubber:
    """Masks a secret in a body chunk by chunk, each occurrence replaced by as many "*" (the
    body keeps its length, and a mask never joins two halves: the secret holds no "*"); each
    chunk goes out as soon as no occurrence can still span it, len(secret) - 1 bytes held
    back. An empty secret passes everything as it comes."""

    def __init__(self, secret: str) -> None:
        self.secret = secret.encode()
        self.mask = b"*" * len(self.secret)
        self._buffer = b""

    def feed(self, chunk: bytes) -> bytes:
        if not self.secret:
            return chunk
        buffer = (self._buffer + chunk).replace(self.secret, self.mask)
        cut = max(0, len(buffer) - len(self.secret) + 1)
        out, self._buffer = buffer[:cut], buffer[cut:]
        return out

    def flush(self) -> bytes:
        out, self._buffer = self._buffer, b""
        return out


# Characters browsers drop or read as "/" in a URL: a Location holding any of them could
# leave the origin in a way urlsplit() does not see ("\\evil.example/x", "/\t/evil").
UNSAFE_IN_LOCATION = re.compile(r"[\x00-\x20\x7f\\]")


def rewrite_location(
    value: str, prefix: str, cluster_root: str, members: dict[str, str], origin: str, current: str
) -> str | None:
    """The Location an upstream redirect should have through the proxy: an absolute URL on
    origin (the cluster's UI origin) under cluster_root, or None when it would lead anywhere
    else (another host, a private address that is no member, another scheme, a path outside
    the cluster's root).

    members maps every member's hostname and address (lower case) to its hostname; prefix is
    this UI's path and cluster_root the cluster's (both without a trailing slash); current is
    the path of the request that was redirected, which a relative Location is taken against."""
    if not value or UNSAFE_IN_LOCATION.search(value):
        return None
    url = urlsplit(value)
    if url.scheme or url.netloc:
        path = _member_path(url, cluster_root, members, origin)
        if path is None:
            return None
    elif value.startswith("/") and not value.startswith(cluster_root + "/"):
        path = prefix + value  # the UI's own absolute path
    else:
        path = value  # relative, or already a proxy path
    # Dot segments resolved, so "/../../x" cannot climb out of the cluster's root.
    resolved = urljoin(current, path)
    if not resolved.startswith(cluster_root + "/"):
        return None
    return origin + resolved


def _member_path(
    url: SplitResult, cluster_root: str, members: dict[str, str], origin: str
) -> str | None:
    """The proxy path of an absolute Location naming a member (or this origin), else None."""
    if url.scheme not in ("http", "https", ""):
        return None
    rest = (url.path or "/") + (f"?{url.query}" if url.query else "")
    rest += f"#{url.fragment}" if url.fragment else ""
    here = urlsplit(origin)
    if url.netloc.lower() == here.netloc.lower() and url.scheme in ("", here.scheme):
        return rest if rest.startswith(cluster_root + "/") else None
    hostname = members.get((url.hostname or "").lower())
    if hostname is None:
        return None
    try:
        port = url.port or (443 if url.scheme == "https" else 80)
    except ValueError:
        return None
    return f"{cluster_root}/{hostname}/{port}{rest}"
