"""Open streams per user, counted in the real Redis: the limit, other users, expiry of a dead
process's slots, and the deadline of a held stream."""

import asyncio

import pytest

from apps.metrics import store
from portal import streams


@pytest.fixture(autouse=True)
def limit(settings):
    settings.STREAMS_PER_USER = 3
    store.client().delete(*(streams.KEY.format(user_id=u) for u in (1, 2)))
    return 3


def test_it_refuses_a_stream_over_the_limit_naming_it():
    slots = [streams.claim(1, "logs") for _ in range(3)]
    with pytest.raises(streams.TooManyStreams, match="at most 3 per user"):
        streams.claim(1, "proxy")
    assert streams.open_streams(1) == 3
    slots[0].release()
    slots[0].release()  # twice is harmless
    streams.claim(1, "proxy")  # a freed slot is free again


def test_another_user_is_not_counted():
    for _ in range(3):
        streams.claim(1, "logs")
    assert streams.claim(2, "logs").user_id == 2


def test_the_slots_of_a_dead_process_free_themselves(settings):
    settings.STREAM_SLOT_TTL = 0.2  # a process that never refreshes nor releases its slots
    for _ in range(3):
        streams.claim(1, "logs")
    with pytest.raises(streams.TooManyStreams):
        streams.claim(1, "logs")
    # Expired slots are dropped by the next claim; Redis's own key expiry is not waited for.
    store.client().zadd(streams.KEY.format(user_id=1), {"x": 0}, xx=True)
    asyncio.run(asyncio.sleep(0.3))
    assert streams.claim(1, "logs").user_id == 1


def test_the_async_block_holds_a_slot_and_gives_it_back():
    async def scenario():
        async with streams.stream_slot(1, "proxy"), streams.stream_slot(1, "proxy"):
            inside = streams.open_streams(1)
            async with streams.stream_slot(1, "proxy"):
                with pytest.raises(streams.TooManyStreams):
                    async with streams.stream_slot(1, "proxy"):
                        pass
        return inside

    assert asyncio.run(scenario()) == 2
    assert streams.open_streams(1) == 0


def test_a_held_stream_ends_at_its_deadline_saying_so_and_frees_its_slot():
    closed = []

    async def drip():
        try:
            while True:
                yield b"."
                await asyncio.sleep(0.05)
        finally:
            closed.append(True)

    async def read():
        slot = streams.claim(1, "proxy")
        return [c async for c in streams.held(slot, drip(), deadline=0.3, ended=b"[cut]")]

    chunks = asyncio.run(read())
    assert chunks[0] == b"." and chunks[-1] == b"[cut]"
    assert closed == [True]
    assert streams.open_streams(1) == 0


def test_a_stream_the_client_leaves_frees_its_slot():
    async def endless():
        while True:
            yield "line\n"
            await asyncio.sleep(0)

    async def read_two():
        body = streams.held(streams.claim(1, "logs"), endless(), deadline=60)
        first = [await anext(body), await anext(body)]
        await body.aclose()  # what the server does when the client goes away
        return first

    assert asyncio.run(read_two()) == ["line\n", "line\n"]
    assert streams.open_streams(1) == 0
