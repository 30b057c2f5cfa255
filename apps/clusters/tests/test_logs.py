"""Log cursors: Docker timestamps compared as strings, and `since` a hair before them."""

import asyncio
from datetime import UTC, datetime

import pytest

from apps.clusters import logs


@pytest.mark.parametrize(
    ("given", "normal"),
    [
        ("2026-11-24T17:03:02.294010202Z", "2026-11-24T17:03:02.294010202Z"),
        ("2026-11-24T17:03:02.5Z", "2026-11-24T17:03:02.500000000Z"),
        ("2026-11-24T17:03:02Z", "2026-11-24T17:03:02.000000000Z"),
    ],
)
def test_cursors_get_nine_digits(given, normal):
    assert logs.normal_cursor(given) == normal


@pytest.mark.parametrize(
    "bad", ["", "yesterday", "2026-11-24 17:03:02Z", "2026-11-24T17:03:02.1234567890Z"]
)
def test_anything_else_is_a_bad_cursor(bad):
    with pytest.raises(logs.BadCursor):
        logs.normal_cursor(bad)


@pytest.mark.parametrize("fraction", ["000000000", "000000999", "294010202", "999999999"])
def test_since_is_just_before_the_cursor(fraction):
    cursor = f"2026-11-24T17:03:02.{fraction}Z"
    exact = datetime(2026, 11, 24, 17, 3, 2, tzinfo=UTC).timestamp() + int(fraction) / 1e9
    assert exact - 3e-6 < logs._since(cursor) < exact  # truncated to us, less 1 us


def test_a_follow_yields_whole_lines_after_the_cursor_only():
    chunks = [
        "2026-11-24T17:00:01.000000000Z one\n2026-11-24T17:00:0",
        "2.000000000Z two\n",
        "2026-11-24T17:00:03.000000000Z three",
    ]
    after = "2026-11-24T17:00:01.000000000Z"
    assert list(lines_of(chunks, after, timestamps=False)) == ["two\n", "three\n"]
    stamped = list(lines_of(chunks, None, timestamps=True))
    assert stamped[0] == "2026-11-24T17:00:01.000000000Z one\n"


def test_a_line_without_a_newline_is_joined_once_and_cut_at_the_limit():
    limit, chunk, count = 1000, "x" * 100, 10_000  # a 1 MB line in 10,000 chunks
    splitter = logs.LineSplitter(limit)
    assert all(splitter.feed(chunk) == [] for _ in range(count))
    [line] = splitter.feed("tail\nnext")
    assert line == "x" * limit + f" [line cut: longer than {limit} characters]"
    assert splitter.flush() == ["next"]
    # Linear: each kept character is copied twice at most (into the parts, into the line);
    # re-joining on every chunk copied ~count * limit characters.
    assert splitter.copied <= 2 * (limit + len("next"))


def test_many_short_chunks_of_long_lines_cost_work_linear_in_the_text():
    splitter = logs.LineSplitter(10_000)
    text = ("y" * 5000 + "\n") * 20
    lines = [line for i in range(0, len(text), 7) for line in splitter.feed(text[i : i + 7])]
    assert lines == ["y" * 5000] * 20
    assert splitter.copied <= 2 * len(text)


def test_a_follow_cuts_a_long_line_and_goes_on_with_the_next():
    chunks = ["2026-11-24T17:00:01.000000000Z ", "a" * 50, "b" * 50, "\nnext\n"]
    out = "".join(lines_of(chunks, None, timestamps=False, limit=60))
    # The limit counts Docker's timestamp and its space (31 characters) too.
    assert out == "a" * 29 + " [line cut: longer than 60 characters]\nnext\n"


def lines_of(chunks: list[str], after: str | None, timestamps: bool, **options) -> list[str]:
    """What a follow yields for a node stream of these chunks."""

    async def stream():
        for chunk in chunks:
            yield chunk

    async def read():
        return [part async for part in logs._alines(stream(), after, timestamps, **options)]

    return asyncio.run(read())
