"""How the proxy fetches bytes from a cluster member's UI: httpx's async client, an overall
deadline for the whole exchange (PROXY_DEADLINE_SECONDS, so a UI that drips a byte now and
then is cut there), a timeout per read and reads of at most 64 KiB (httpcore's read size).

Under ASGI the exchange runs on the server's event loop: the view's thread waits only for the
answer's headers, and the body streams on the loop. Anywhere else (the WSGI test client) the
same code runs on a private loop in a thread of its own, for the life of the response.
"""

import asyncio
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Coroutine, Iterator
from typing import Any, TypeVar

import httpx
from asgiref.sync import async_to_sync
from django.conf import settings
from django.core.handlers.asgi import ASGIRequest
from django.http import HttpRequest

T = TypeVar("T")


class UpstreamError(Exception):
    """The UI did not answer usefully; the message is shown on the 502 page."""


class Exchange:
    """One request to a UI and its answer, all of it within PROXY_DEADLINE_SECONDS."""

    def __init__(
        self,
        method: str,
        url: str,
        headers: dict[str, str],
        body: bytes,
        where: str,
        source: str = "",
    ):
        self.method, self.url, self.headers, self.body, self.where = (
            method,
            url,
            headers,
            body,
            where,
        )
        self.source = source  # the local address to connect from (the perimeter's portal)
        self.end = time.monotonic() + settings.PROXY_DEADLINE_SECONDS
        self.client: httpx.AsyncClient | None = None
        self.response: httpx.Response | None = None

    def remaining(self) -> float:
        return max(0.0, self.end - time.monotonic())

    async def open(self) -> httpx.Response:
        """Send the request; the answer's status and headers, its body still to read."""
        timeout = httpx.Timeout(
            settings.PROXY_READ_TIMEOUT, connect=settings.PROXY_CONNECT_TIMEOUT, pool=5
        )
        # trust_env=False: HTTP(S)_PROXY of the portal's environment never sees cluster traffic.
        self.client = httpx.AsyncClient(
            timeout=timeout,
            follow_redirects=False,
            trust_env=False,
            transport=httpx.AsyncHTTPTransport(local_address=self.source or None),
        )
        request = self.client.build_request(
            self.method, self.url, headers=self.headers, content=self.body
        )
        try:
            async with asyncio.timeout(self.remaining()):
                self.response = await self.client.send(request, stream=True)
        except (httpx.TimeoutException, TimeoutError) as error:
            raise UpstreamError(
                f"{self.where} did not answer in time ({type(error).__name__})"
            ) from None
        except httpx.HTTPError as error:
            raise UpstreamError(f"{self.where} is not answering: {type(error).__name__}") from None
        return self.response

    async def close(self) -> None:
        if self.response is not None:
            await self.response.aclose()
        if self.client is not None:
            await self.client.aclose()


class ServerLoop:
    """Under ASGI: the server's own event loop (the view runs in a thread beside it)."""

    def run(self, coroutine: Coroutine[Any, Any, T]) -> T:
        return async_to_sync(_awaited)(coroutine)

    def stream(self, body: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
        return body  # the ASGI handler reads it on the loop

    def stop(self) -> None:
        pass


class PrivateLoop:
    """Elsewhere: a loop in a thread of its own, running the exchange and its body."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()

    def run(self, coroutine: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result()

    def stream(self, body: AsyncIterator[bytes]) -> Iterator[bytes]:
        try:
            while True:
                try:
                    yield self.run(_awaited(anext(body)))
                except StopAsyncIteration:
                    return
        finally:
            aclose = getattr(body, "aclose", None)
            if aclose is not None:
                self.run(aclose())
            self.stop()

    def stop(self) -> None:
        if not self.loop.is_closed():
            self.loop.call_soon_threadsafe(self.loop.stop)
            self.thread.join()
            self.loop.close()


def runner_for(request: HttpRequest) -> ServerLoop | PrivateLoop:
    return ServerLoop() if isinstance(request, ASGIRequest) else PrivateLoop()


async def _awaited(awaitable: Awaitable[T]) -> T:
    return await awaitable
