"""Server-side SVG chart geometry for the Metrics pages: numbers only, the templates draw them.

No JavaScript and nothing fetched: a chart is a viewBox that scales to the
card's width, with polylines, bars and deploy marks computed here. A chart
alone in its card is WIDE_WIDTH units wide, one of two side by side
WIDTH, so at 1,280 px both fill their card with text about its CSS size
(a 480-unit chart capped at 720 px left half of a wide card empty). Every string a template prints as text
(labels, class names) goes through Django's escaping there; what this
module puts in attributes is numbers and the palette below.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

WIDTH, WIDE_WIDTH, HEIGHT = 480.0, 960.0, 200.0
LEFT, RIGHT, TOP, BOTTOM = 44.0, 8.0, 10.0, 22.0
# Told apart at a glance, in the legend's small swatches too (the fifth was an orange next to the second's).
PALETTE = ("#2f6fdf", "#d9480f", "#2b8a3e", "#ae3ec9", "#f2b705", "#1098ad", "#212529", "#868e96")
# Durations: a chart in seconds of sub-millisecond jobs read "0 s" on every tick; these pick a readable unit.
TIME_UNITS = ((1.0, 1.0, " s"), (0.001, 1000.0, " ms"), (0.0, 1_000_000.0, " µs"))


@dataclass
class Line:
    label: str
    color: str
    points: str  # "x,y x,y ..." for <polyline>
    dots: list[tuple[float, float]]  # a lone sample gets a dot: a one-point polyline draws nothing
    partial: str = ""  # the last segment, into the bucket still under way: drawn dashed


@dataclass
class Bar:
    x: float
    y: float
    width: float
    height: float
    label: str
    value: int


@dataclass
class Tick:
    at: float
    label: str


@dataclass
class Chart:
    width: float = WIDTH
    height: float = HEIGHT
    lines: list[Line] = field(default_factory=list)
    bars: list[Bar] = field(default_factory=list)
    y_ticks: list[Tick] = field(default_factory=list)
    x_ticks: list[Tick] = field(default_factory=list)
    marks: list[Tick] = field(default_factory=list)
    in_progress: bool = False  # the last bucket is drawn dashed: still under way
    plot_left: float = LEFT
    plot_right: float = WIDTH - RIGHT
    plot_top: float = TOP
    plot_bottom: float = HEIGHT - BOTTOM

    @property
    def empty(self) -> bool:
        return not self.lines and not any(bar.value for bar in self.bars)


def nice_ceiling(value: float) -> float:
    """1, 2, 2.5 or 5 times a power of ten, at least ``value`` (a readable top for the y axis)."""
    if value <= 0:
        return 1.0
    power = 10 ** math.floor(math.log10(value))
    for step in (1, 2, 2.5, 5, 10):
        if step * power >= value:
            return step * power
    return 10 * power


def number(value: float) -> str:
    if value >= 1000:
        return f"{value / 1000:g}k"
    return f"{value:g}"


def _bucket_label(bucket: str) -> str:
    return bucket[11:16]  # "2026-02-04T08:40:00Z" -> "08:40"


def time_scale(top: float, unit: str) -> tuple[float, str]:
    """The factor and unit the axis of a chart whose top is ``top`` prints its values in."""
    if unit != " s":
        return 1.0, unit
    return next((factor, name) for floor, factor, name in TIME_UNITS if top >= floor)


def line_chart(buckets: list[str], series: list[tuple[str, dict[str, float]]],
               marks: list[tuple[str, str]] = (), unit: str = "", wide: bool = False,
               last_in_progress: bool = False) -> Chart:
    """One line per series over ``buckets`` (oldest first); missing buckets read as 0.

    ``marks`` are (bucket, label) pairs drawn as vertical lines (deploys). A time ``unit`` of " s" is
    printed in ms or µs when the values are that small. ``wide``: a chart alone in its card.
    ``last_in_progress``: the newest bucket is the minute (or ten) under way, whose counts arrive at each
    process's next beat; drawn solid it read as every line dropping at the right edge while the table
    counted the runs, so it is a dashed segment of its own ("so far").
    """
    width = WIDE_WIDTH if wide else WIDTH
    chart = Chart(width=width, plot_right=width - RIGHT)
    top = nice_ceiling(max((value for _label, values in series for value in values.values()), default=0.0))
    span_x = chart.plot_right - chart.plot_left
    span_y = chart.plot_bottom - chart.plot_top
    count = max(len(buckets) - 1, 1)
    position = {bucket: chart.plot_left + span_x * index / count for index, bucket in enumerate(buckets)}

    def y_of(value: float) -> float:
        return chart.plot_bottom - span_y * min(value, top) / top

    for index, (label, values) in enumerate(series):
        coordinates = [(position[bucket], y_of(values.get(bucket, 0.0))) for bucket in buckets]
        partial = ""
        if last_in_progress and len(coordinates) > 1:
            partial = " ".join(f"{x:.1f},{y:.1f}" for x, y in coordinates[-2:])
            coordinates = coordinates[:-1]
        points = " ".join(f"{x:.1f},{y:.1f}" for x, y in coordinates)
        chart.lines.append(Line(label, PALETTE[index % len(PALETTE)], points,
                                coordinates if len(coordinates) == 1 else [], partial))
    chart.in_progress = last_in_progress and len(buckets) > 1
    factor, shown_unit = time_scale(top, unit)
    chart.y_ticks = [Tick(y_of(top * step / 4), number(top * step / 4 * factor) + (shown_unit if step == 4 else ""))
                     for step in range(5)]
    every = max(1, len(buckets) // (10 if wide else 5))
    chart.x_ticks = [Tick(position[bucket], _bucket_label(bucket)) for bucket in buckets[::every]]
    chart.marks = [Tick(position[bucket], label) for bucket, label in marks if bucket in position]
    return chart


def bar_chart(values: list[int], labels: list[str], wide: bool = False) -> Chart:
    """One bar per value (the histogram's 26 buckets), labelled below every few bars."""
    width = WIDE_WIDTH if wide else WIDTH
    chart = Chart(width=width, plot_right=width - RIGHT)
    top = nice_ceiling(max(values, default=0))
    span_x = chart.plot_right - chart.plot_left
    span_y = chart.plot_bottom - chart.plot_top
    slot = span_x / max(len(values), 1)
    for index, (value, label) in enumerate(zip(values, labels, strict=True)):
        height = span_y * value / top
        chart.bars.append(Bar(chart.plot_left + slot * index + 1, chart.plot_bottom - height, max(slot - 2, 1),
                              height, label, value))
    chart.y_ticks = [Tick(chart.plot_bottom - span_y * step / 4, number(top * step / 4)) for step in range(5)]
    chart.x_ticks = [Tick(chart.plot_left + slot * (index + 0.5), label)
                     for index, label in enumerate(labels) if index % 5 == 0]
    return chart


SPARK_WIDTH, SPARK_HEIGHT = 80.0, 18.0


def sparkline(buckets: list[str], values: dict[str, float]) -> str:
    """Polyline points for a small line (missing buckets read as 0); "" when there is nothing to draw."""
    if not values or len(buckets) < 2:
        return ""
    top = max(values.values()) or 1.0
    step = SPARK_WIDTH / (len(buckets) - 1)
    return " ".join(f"{index * step:.1f},{SPARK_HEIGHT - 1 - (SPARK_HEIGHT - 2) * values.get(bucket, 0.0) / top:.1f}"
                    for index, bucket in enumerate(buckets))
