"""Request bodies bounded before Django reads them.

Under ASGI, Django's handler reads a request's whole body (to memory, then a temporary file)
before any middleware runs, so portal.limits.RequestLimitsMiddleware sees its size too late: an
anonymous client could make the portal take gigabytes on any page (issue 41). `bounded_bodies`
stands in front of the handler with the same rule (portal.limits.body_limit): a declared
Content-Length over the path's limit is answered 413 without reading a byte, and a body's bytes
are counted as the server hands them over (a chunked body declares no length), so the 413 goes
out as soon as the limit is passed. The handler is then told the client left, so it stops
reading, and the answer closes the connection, so the server stops too.
"""

import asyncio
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from django.core.handlers.asgi import get_script_prefix

from portal.limits import body_limit, refusal

Scope = dict[str, Any]
Message = Mapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

LINGER_SECONDS = 1.0  # between a 413 and the close (send_refusal)


def bounded_bodies(app: ASGIApp) -> ASGIApp:
    """`app` behind the body limit; websockets and lifespan pass through untouched."""

    async def application(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return await app(scope, receive, send)
        # The path as Django's request gives it (path_info): limits.JOB_SUBMIT matches that.
        path = scope["path"].removeprefix(get_script_prefix(scope))
        limit, too_large = body_limit(path)
        if limit is None:
            return await app(scope, receive, send)
        declared = declared_length(scope)
        if declared is not None and declared > limit:
            return await send_refusal(send, path, too_large)
        counted = CountedBody(receive, send, limit, path, too_large)
        await app(scope, counted.receive, counted.send)

    return application


def declared_length(scope: Scope) -> int | None:
    """The request's Content-Length, None without one (chunked) or if it is no number (the
    server refuses those; the bytes are counted anyway)."""
    for name, value in scope["headers"]:
        if name.lower() == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None
    return None


class CountedBody:
    """The receive and send an application gets: body bytes counted as they arrive."""

    def __init__(self, receive: Receive, send: Send, limit: int, path: str, message: str):
        self._receive, self._send = receive, send
        self.limit, self.path, self.message = limit, path, message
        self.received = 0
        self.refused = False
        self.answering = False  # the application has started its answer

    async def receive(self) -> Message:
        if self.refused:
            return {"type": "http.disconnect"}
        message = await self._receive()
        if message["type"] == "http.request":
            self.received += len(message.get("body", b""))
            if self.received > self.limit:
                self.refused = True
                if not self.answering:
                    await send_refusal(self._send, self.path, self.message)
                # Django's handler stops reading its body at a disconnect and answers nothing.
                return {"type": "http.disconnect"}
        return message

    async def send(self, message: Message) -> None:
        if self.refused:
            return  # the 413 went out instead (or the half-sent answer is abandoned)
        if message["type"] == "http.response.start":
            self.answering = True
        await self._send(message)


async def send_refusal(send: Send, path: str, message: str) -> None:
    """portal.limits' 413 for `path`, closing the connection: the server then reads no more of
    the body (a kept-alive connection would have it read, and drop, the rest). It closes a
    moment after the answer rather than with it: a close with the client's bytes unread resets
    the connection, and a proxy still sending the body (Caddy, Go's HTTP client) may then lose
    the answer and say 502. Meanwhile the server reads no more than its buffer (uvicorn stops
    reading at 64 KiB that nobody takes)."""
    response = refusal(path, 413, message)
    headers = [(name.lower().encode(), value.encode("latin1")) for name, value in response.items()]
    headers += [
        (b"content-length", str(len(response.content)).encode()),
        (b"x-content-type-options", b"nosniff"),
        (b"connection", b"close"),
    ]
    await send({"type": "http.response.start", "status": 413, "headers": headers})
    await send({"type": "http.response.body", "body": response.content, "more_body": True})
    await asyncio.sleep(LINGER_SECONDS)
    await send({"type": "http.response.body", "body": b"", "more_body": False})
