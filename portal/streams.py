"""Long answers (log follows, proxied web UI responses): at most STREAMS_PER_USER open at once
per user across every web process, each with an overall deadline.

An open stream is a member of its user's Redis sorted set, scored with the time its slot
expires. A stream that lives on pushes that time on every STREAM_SLOT_TTL / 3 seconds, so the
slots of a process that died free themselves within STREAM_SLOT_TTL instead of leaking. A
claim is one script (drop the expired, count, add if under the limit): two processes never
both take the last slot.

    async with stream_slot(user.id, "proxy"):       # TooManyStreams when over the limit
        ...
or, where the slot is taken before the answer starts and held while its body streams:
    slot = claim(user.id, "logs")                   # in the view: 429 before any byte
    return StreamingHttpResponse(held(slot, body, deadline=...))
"""

import asyncio
import logging
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import TypeVar

import redis
from asgiref.sync import sync_to_async
from django.conf import settings

from apps.metrics import store

log = logging.getLogger(__name__)
T = TypeVar("T")

KEY = "platter:streams:{user_id}"
# Redis's clock, not each web host's, decides what has expired.
CLAIM = """
local now = redis.call('TIME')
local t = tonumber(now[1]) + tonumber(now[2]) / 1e6
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', t)
if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[1]) then return 0 end
redis.call('ZADD', KEYS[1], t + tonumber(ARGV[2]), ARGV[3])
redis.call('EXPIRE', KEYS[1], math.ceil(tonumber(ARGV[2])) + 1)
return 1
"""
REFRESH = """
local now = redis.call('TIME')
local t = tonumber(now[1]) + tonumber(now[2]) / 1e6
redis.call('ZADD', KEYS[1], 'XX', t + tonumber(ARGV[1]), ARGV[2])
redis.call('EXPIRE', KEYS[1], math.ceil(tonumber(ARGV[1])) + 1)
return 1
"""


class TooManyStreams(Exception):
    """The user has STREAMS_PER_USER streams open; the message names the limit."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        super().__init__(
            f"too many open streams: at most {limit} per user (log follows and web UI "
            "requests); close one or wait for one to end, then try again"
        )


@dataclass
class Slot:
    """One open stream of a user; release() is safe to call more than once."""

    user_id: int
    kind: str
    token: str = field(default_factory=lambda: uuid.uuid4().hex)
    released: bool = False

    @property
    def key(self) -> str:
        return KEY.format(user_id=self.user_id)

    def refresh(self) -> None:
        _redis(lambda r: r.eval(REFRESH, 1, self.key, settings.STREAM_SLOT_TTL, self.token))

    def release(self) -> None:
        if not self.released:
            self.released = True
            _redis(lambda r: r.zrem(self.key, self.token))

    async def arefresh(self) -> None:
        await sync_to_async(self.refresh, thread_sensitive=False)()

    async def arelease(self) -> None:
        await sync_to_async(self.release, thread_sensitive=False)()


def _redis(command):
    """Run a command on the cache's Redis. Without Redis the limit is not enforced (logged):
    streams keep working through a Redis outage, which the health check reports."""
    try:
        return command(store.client())
    except (redis.RedisError, OSError) as error:
        log.warning("open streams not counted (Redis: %s)", error)
        return None


def claim(user_id: int, kind: str) -> Slot:
    """A slot for a new stream of the user's; TooManyStreams when they have the most open."""
    limit = settings.STREAMS_PER_USER
    slot = Slot(user_id, kind)
    taken = _redis(
        lambda r: r.eval(CLAIM, 1, slot.key, limit, settings.STREAM_SLOT_TTL, slot.token)
    )
    if taken == 0:
        raise TooManyStreams(limit)
    return slot


def open_streams(user_id: int) -> int:
    """How many unexpired slots the user holds (for tests and the bench)."""
    key = KEY.format(user_id=user_id)
    return _redis(lambda r: r.zcount(key, time.time(), "+inf")) or 0


async def aclaim(user_id: int, kind: str) -> Slot:
    return await sync_to_async(claim, thread_sensitive=False)(user_id, kind)


@asynccontextmanager
async def stream_slot(user_id: int, kind: str) -> AsyncIterator[Slot]:
    """Hold a slot for the block, pushing its expiry on while it runs; TooManyStreams when
    the user has the most streams open."""
    slot = await aclaim(user_id, kind)
    keeper = asyncio.create_task(_keep(slot))
    try:
        yield slot
    finally:
        keeper.cancel()
        await slot.arelease()


async def _keep(slot: Slot) -> None:
    while True:
        await asyncio.sleep(settings.STREAM_SLOT_TTL / 3)
        await slot.arefresh()


async def held(
    slot: Slot | None, body: AsyncIterator[T], *, deadline: float, ended: T | None = None
) -> AsyncIterator[T]:
    """The body, with the slot held (and kept fresh) until it ends, the client leaves or
    `deadline` seconds pass; then `ended`, if given, says the deadline cut it. The slot is
    released whichever way it ends. Without a slot, only the deadline applies."""
    # The deadline wraps each wait for the body, never a yield: a timeout around a yield would
    # cancel whatever the consumer awaits at that moment (sending to the client).
    end = asyncio.get_running_loop().time() + deadline
    keeper = asyncio.create_task(_keep(slot)) if slot is not None else None
    try:
        while True:
            try:
                async with asyncio.timeout_at(end):
                    chunk = await anext(body)
            except StopAsyncIteration:
                return
            except TimeoutError:
                log.info("a stream ended at its deadline of %s s (%s)", deadline, slot)
                if ended is not None:
                    yield ended
                return
            yield chunk
    finally:
        if keeper is not None:
            keeper.cancel()
        aclose = getattr(body, "aclose", None)
        if aclose is not None:
            await aclose()
        if slot is not None:
            await slot.arelease()


async def in_thread(stream: Iterator[T]) -> AsyncIterator[T]:
    """A blocking iterator read one item at a time in a thread, so the loop never blocks on
    it. Under ASGI, Django would otherwise read a synchronous streaming body to its end before
    sending a byte (and warn): a follow would arrive only when it ended."""
    done = object()
    step = sync_to_async(lambda: next(stream, done), thread_sensitive=False)
    try:
        while (item := await step()) is not done:
            yield item  # type: ignore[misc]
    finally:
        close = getattr(stream, "close", None)
        if close is not None:
            await sync_to_async(close, thread_sensitive=False)()
