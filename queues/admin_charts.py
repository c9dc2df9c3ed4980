"""The due-time histogram of the queue page as plain SVG geometry.

Computed here and drawn by a template (templates/queues/_histogram.html), so
the chart is in the HTML itself: no JavaScript, no chart library, no CDN, and
every bar carries a <title> with its time range and count."""
from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta, timezone

WIDTH = 760
HEIGHT = 170
LEFT = 48        # room for the y-axis labels
RIGHT = 22       # room for the last x-axis label
TOP = 12
BOTTOM = 34      # room for two lines of x-axis labels
MAX_X_LABELS = 12


@dataclass(frozen=True)
class Bar:
    x: float
    y: float
    width: float
    height: float
    title: str


@dataclass(frozen=True)
class Tick:
    x: float
    offset: str      # "+6h"
    clock: str       # "14:00" (UTC)


@dataclass(frozen=True)
class Histogram:
    """One chart: `counts[i]` delayed jobs fall due in bucket i from `start`."""

    label: str
    counts: list[int]
    bucket_s: int
    start: datetime
    total: int
    peak: int
    busiest: str          # the busiest bucket's time range, or "" when empty
    bars: list[Bar]
    ticks: list[Tick]
    width: int = WIDTH
    height: int = HEIGHT
    left: int = LEFT
    top: int = TOP
    plot_bottom: int = HEIGHT - BOTTOM
    plot_right: int = WIDTH - RIGHT

    @property
    def center_x(self) -> float:
        return (self.left + self.plot_right) / 2

    @property
    def center_y(self) -> float:
        return (self.top + self.plot_bottom) / 2


def build_histogram(label: str, start_s: int, bucket_s: int, counts: list[int]) -> Histogram:
    start = datetime.fromtimestamp(start_s, tz=timezone.utc)
    plot_width = WIDTH - LEFT - RIGHT
    plot_height = HEIGHT - TOP - BOTTOM
    slot = plot_width / max(1, len(counts))
    gap = min(2.0, slot * 0.2)
    peak = max(counts, default=0)
    bars = []
    for i, count in enumerate(counts):
        if count <= 0:
            continue
        height = max(1.0, plot_height * count / peak)
        bars.append(Bar(x=round(LEFT + i * slot + gap / 2, 2), y=round(TOP + plot_height - height, 2),
                        width=round(slot - gap, 2), height=round(height, 2),
                        title=f"{_range(start, i, bucket_s)} UTC: {count} job{'s' if count != 1 else ''}"))
    busiest = _range(start, counts.index(peak), bucket_s) + " UTC" if peak else ""
    return Histogram(label=label, counts=counts, bucket_s=bucket_s, start=start, total=sum(counts), peak=peak,
                     busiest=busiest, bars=bars, ticks=_ticks(start, bucket_s, len(counts), slot))


def _range(start: datetime, index: int, bucket_s: int) -> str:
    low = start + timedelta(seconds=index * bucket_s)
    high = low + timedelta(seconds=bucket_s)
    fmt = "%H:%M" if low.date() == high.date() or high.time() == datetime.min.time() else "%a %H:%M"
    return f"{low:%a %H:%M}–{high:{fmt}}"


def _ticks(start: datetime, bucket_s: int, buckets: int, slot: float) -> list[Tick]:
    every = max(1, -(-buckets // MAX_X_LABELS))
    ticks = []
    for i in range(0, buckets + 1, every):
        at = start + timedelta(seconds=i * bucket_s)
        hours = i * bucket_s / 3600
        offset = f"+{hours:g}h" if i else "now"
        ticks.append(Tick(x=round(LEFT + i * slot, 2), offset=offset, clock=f"{at:%H:%M}"))
    return ticks
