"""Docker's multiplexed log stream taken apart as it comes: frames split anywhere between
reads, each payload given out at once (the lab test follows real containers)."""

import asyncio
import struct

import pytest

from apps.nodes import logstream


def frame(stream: int, payload: bytes) -> bytes:
    return struct.pack(">BxxxL", stream, len(payload)) + payload


def payloads(chunks: list[bytes]) -> list[bytes]:
    async def source():
        for chunk in chunks:
            yield chunk

    async def read():
        return [part async for part in logstream._frames(source())]

    return asyncio.run(read())


@pytest.mark.parametrize("size", [1, 3, 8, 9, 64])
def test_frames_split_anywhere_give_the_same_text(size):
    raw = frame(1, b"one\n") + frame(2, b"err\n") + frame(1, b"two\nthr")
    chunks = [raw[i : i + size] for i in range(0, len(raw), size)]
    assert b"".join(payloads(chunks)) == b"one\nerr\ntwo\nthr"


def test_a_payload_is_given_out_before_its_frame_is_complete():
    head = frame(1, b"x" * 1000)[:508]  # the header and 500 of the 1000 bytes
    assert payloads([head]) == [b"x" * 500]
