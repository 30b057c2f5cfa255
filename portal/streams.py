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

Node calls made inside a web request (a job's outputs, an HDFS listing, a container's log, a
download's first bytes) count the same way in a pool of their own, NODE_CALLS_PER_USER each,
and give the request's database connections back before they wait:

    with node_call(user.id, "job outputs"):         # TooManyNodeCalls when over the limit
        found = results.list_outputs(job)
"""

import asyncio
import logging
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import TypeVar

import redis
from asgiref.sync import sync_to_async
from django.conf import settings
from django.db import connections

from apps.metrics import store

log = logging.getLogger(__name__)
T = TypeVar("T")

KEY = "platter:streams:{user_id}"
NODE_CALLS_KEY = "platter:node-calls:{user_id}"
_in_node_call: ContextVar[bool] = ContextVar("in_node_call", default=False)
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


class TooManyNodeCalls(TooManyStreams):
    """The user has NODE_CALLS_PER_USER node calls in flight; the message names the limit."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        Exception.__init__(
            self,
            f"too many node calls in flight: at most {limit} per user (job outputs and their "
            "downloads, HDFS listings, container logs); wait for one to end, then try again",
        )


@dataclass(frozen=True)
class Pool:
    """What a slot counts against: its Redis key, its per-user limit and how long a slot
    lives unrefreshed (longer than the longest wait it covers)."""

    key: str
    limit_setting: str
    ttl_setting: str
    refusal: type[TooManyStreams]

    @property
    def limit(self) -> int:
        return getattr(settings, self.limit_setting)

    @property
    def ttl(self) -> int:
        return getattr(settings, self.ttl_setting)


STREAMS = Pool(KEY, "STREAMS_PER_USER", "STREAM_SLOT_TTL", TooManyStreams)
NODE_CALLS = Pool(NODE_CALLS_KEY, "NODE_CALLS_PER_USER", "NODE_CALL_SLOT_TTL", TooManyNodeCalls)


@dataclass
class Slot:
    """One open stream (or node call) of a user; release() is safe to call more than once."""

    user_id: int
    kind: str
    token: str = field(default_factory=lambda: uuid.uuid4().hex)
    released: bool = False
    pool: Pool = STREAMS
    handed_over: bool = False  # to a response's body, which releases it (node_call)

    @property
    def key(self) -> str:
        return self.pool.key.format(user_id=self.user_id)

    def refresh(self) -> None:
        _redis(lambda r: r.eval(REFRESH, 1, self.key, self.pool.ttl, self.token))

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


def claim(user_id: int, kind: str, pool: Pool = STREAMS) -> Slot:
    """A slot for a new stream of the user's; TooManyStreams (the pool's refusal) when they
    have the most open."""
    limit = pool.limit
    slot = Slot(user_id, kind, pool=pool)
    taken = _redis(lambda r: r.eval(CLAIM, 1, slot.key, limit, pool.ttl, slot.token))
    if taken == 0:
        raise pool.refusal(limit)
    return slot


def open_streams(user_id: int, pool: Pool = STREAMS) -> int:
    """How many unexpired slots the user holds (for tests and the bench)."""
    key = pool.key.format(user_id=user_id)
    return _redis(lambda r: r.zcount(key, time.time(), "+inf")) or 0


@contextmanager
def node_call(user_id: int, what: str) -> Iterator[Slot]:
    """Hold one of the user's node-call slots for the block, in which the request's database
    connections go back as each node client is taken (before_node_call: the lookups that
    found the node are done by then), so a slow node holds neither a connection nor more than
    the user's share. TooManyNodeCalls when the user has NODE_CALLS_PER_USER in flight. A call
    whose answer goes on streaming (a download) passes the slot on with `slot.handed_over =
    True`; the body (held) then releases it when it ends."""
    slot = claim(user_id, what, NODE_CALLS)
    inside = _in_node_call.set(True)
    try:
        yield slot
    finally:
        _in_node_call.reset(inside)
        if not slot.handed_over:
            slot.release()


def before_node_call() -> None:
    """The node layer calls this as it hands out a client: inside node_call, the request's
    database connections go back now, as what comes next waits on a node."""
    if _in_node_call.get():
        release_connections()


def release_connections() -> None:
    """Give the request's database connections back now (to the pool, or closed) rather than
    when it ends: before a wait on a node, or a stream that may last minutes. One inside a
    transaction (a test's, or an atomic block) stays; the next query opens one again."""
    for connection in connections.all(initialized_only=True):
        if connection.connection is not None and not connection.in_atomic_block:
            connection.close()


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
        await asyncio.sleep(slot.pool.ttl / 3)
        await slot.arefresh()


async def held(
    slot: Slot | None, body: AsyncIterator[T], *, deadline: float | None, ended: T | None = None
) -> AsyncIterator[T]:
    """The body, with the slot held (and kept fresh) until it ends, the client leaves or
    `deadline` seconds pass (None: no deadline); then `ended`, if given, says the deadline cut
    it. The slot is released whichever way it ends. Without a slot, only the deadline applies."""
    # The deadline wraps each wait for the body, never a yield: a timeout around a yield would
    # cancel whatever the consumer awaits at that moment (sending to the client).
    end = None if deadline is None else asyncio.get_running_loop().time() + deadline
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
