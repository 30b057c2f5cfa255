"""Log cursors: Docker timestamps compared as strings, and `since` a hair before them."""

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
    assert list(logs._lines(iter(chunks), after, timestamps=False)) == ["two\n", "three\n"]
    stamped = list(logs._lines(iter(chunks), None, timestamps=True))
    assert stamped[0] == "2026-11-24T17:00:01.000000000Z one\n"
