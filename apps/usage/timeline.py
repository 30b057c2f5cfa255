"""Time spans from a cluster's life, cut into UTC days: the arithmetic of usage accounting,
with no database (services.py feeds it).

A cluster holds cores and memory while its containers exist (the states in COMPUTE_STATES,
entered and left at the times its transition events carry) and each whole disk from the moment
it is reserved until it is released (its DiskAllocation's created and released), stopped time
included: a stopped cluster keeps its disks from everyone else."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta

# Containers run in these states, so the instances hold their cores and memory. `stopping`
# counts: the containers are still up until `stopped` is entered; so does `resizing`.
COMPUTE_STATES = frozenset({"configuring", "running", "degraded", "resizing", "stopping"})


@dataclass(frozen=True)
class Span:
    start: datetime
    end: datetime

    @property
    def seconds(self) -> float:
        return max(0.0, (self.end - self.start).total_seconds())

    def clip(self, start: datetime, end: datetime) -> Span | None:
        """The part of the span inside [start, end), or None."""
        clipped = Span(max(self.start, start), min(self.end, end))
        return clipped if clipped.end > clipped.start else None


def compute_spans(transitions: Iterable[tuple[datetime, str]], until: datetime) -> list[Span]:
    """The spans a cluster's containers existed, from its transitions (time, state entered) in
    time order; a span still open ends at ``until`` (now, for a running cluster)."""
    spans: list[Span] = []
    opened: datetime | None = None
    for at, state in transitions:
        if state in COMPUTE_STATES and opened is None:
            opened = at
        elif state not in COMPUTE_STATES and opened is not None:
            spans.append(Span(opened, at))
            opened = None
    if opened is not None and until > opened:
        spans.append(Span(opened, until))
    return spans


def intersect(spans: list[Span], window: Span) -> list[Span]:
    """The parts of ``spans`` inside ``window``."""
    return [s for s in (span.clip(window.start, window.end) for span in spans) if s]


def by_day(span: Span) -> Iterator[tuple[date, float]]:
    """(UTC day, seconds of the span in that day) for every day the span touches."""
    start = span.start.astimezone(UTC)
    end = span.end.astimezone(UTC)
    while start < end:
        midnight = datetime.combine(start.date() + timedelta(days=1), time.min, tzinfo=UTC)
        cut = min(end, midnight)
        yield start.date(), (cut - start).total_seconds()
        start = cut


def day_window(first: date, last: date) -> Span:
    """[first 00:00 UTC, the day after last 00:00 UTC): a range of whole days, both included."""
    return Span(
        datetime.combine(first, time.min, tzinfo=UTC),
        datetime.combine(last + timedelta(days=1), time.min, tzinfo=UTC),
    )
