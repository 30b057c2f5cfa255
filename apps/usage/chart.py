"""A stacked bar chart of core-hours by day and product, as plain geometry for an inline SVG
(no script: the page works with scripts off and under the portal's CSP)."""

from dataclasses import dataclass, field
from datetime import date, timedelta

from .services import Row

WIDTH, HEIGHT, GAP = 720, 200, 2
# Colour-blind-safe palette (Okabe-Ito), one colour per product in name order.
COLOURS = ("#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442", "#000")


@dataclass
class Segment:
    product: str
    hours: float
    y: float
    height: float
    colour: str


@dataclass
class Bar:
    day: date
    x: float
    width: float
    total: float
    segments: list[Segment] = field(default_factory=list)


@dataclass
class Chart:
    bars: list[Bar]
    legend: list[tuple[str, str]]
    peak: float
    width: int = WIDTH
    height: int = HEIGHT


def core_hours_chart(rows: list[Row], first: date, last: date, figure: str = "core_h") -> Chart:
    days = [first + timedelta(days=n) for n in range((last - first).days + 1)]
    products = sorted({r.product for r in rows})
    colour = {p: COLOURS[n % len(COLOURS)] for n, p in enumerate(products)}
    per_day: dict[date, dict[str, float]] = {d: {} for d in days}
    for r in rows:
        if r.date in per_day:
            per_day[r.date][r.product] = per_day[r.date].get(r.product, 0.0) + getattr(r, figure)
    peak = max((sum(v.values()) for v in per_day.values()), default=0.0) or 1.0
    width = WIDTH / max(1, len(days))
    bars = []
    for n, day in enumerate(days):
        bar = Bar(day, n * width, max(1.0, width - GAP), sum(per_day[day].values()))
        top = float(HEIGHT)
        for product in products:
            hours = per_day[day].get(product, 0.0)
            if hours <= 0:
                continue
            height = HEIGHT * hours / peak
            top -= height
            bar.segments.append(Segment(product, hours, top, height, colour[product]))
        bars.append(bar)
    return Chart(bars, [(p, colour[p]) for p in products], peak)
