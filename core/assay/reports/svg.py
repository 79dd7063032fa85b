"""Inline SVG figures for HTML reports, drawn by hand so reports need no plotting library.

Output is a pure function of the input (fixed sizes, coordinates rounded to
one decimal, colours by endpoint), so the same bundle always gives the same
bytes. Every piece of text is escaped: labels come from the bundle. The
``<svg>`` elements carry no ``xmlns`` and no links, since they are meant to be
inlined in an HTML page, which needs neither.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from html import escape

from .model import FigurePoint, format_ci

__all__ = ["PALETTE", "endpoint_colours", "family_chart", "line_chart", "rate_chart", "spread_chart", "use_colours"]

#: Okabe-Ito colours (without yellow, which is unreadable on white): distinguishable with colour blindness.
PALETTE = ("#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#000000")
_TICKS = (0.0, 0.25, 0.5, 0.75, 1.0)
_MAX_LABEL = 40
#: Upper ends the line and spread charts choose from: the smallest that holds every value.
_SCALES = (0.1, 0.25, 0.5, 0.75, 1.0)


def _n(value: float) -> str:
    return f"{value:.1f}"


def _clamp(value: float) -> float:
    return min(1.0, max(0.0, float(value)))


def _short(text: str, limit: int = _MAX_LABEL) -> str:
    # Long labels are cut for layout; the full text stays in the <title> tooltip.
    return text if len(text) <= limit else text[: max(1, limit - 1)] + "\u2026"


def _summary(point: FigurePoint) -> str:
    # The report's one number format for rates: percent with one decimal, the interval likewise.
    value = "n/a" if point.value is None else f"{100 * point.value:.1f}%"
    counts = f" ({point.numerator}/{point.denominator})" if point.numerator is not None else ""
    ci = format_ci(point.low, point.high)
    return f"{value} {ci}{counts}".replace("  ", " ").strip()


def endpoint_colours(endpoints: Sequence[str]) -> dict[str, str]:
    """One colour per endpoint, by its place in the plan: the same endpoint has the same colour in every chart."""
    return {endpoint: PALETTE[index % len(PALETTE)] for index, endpoint in enumerate(dict.fromkeys(endpoints))}


#: The colours of the page being drawn (set by :func:`use_colours`); charts fall back to colours by position.
_PAGE_COLOURS: dict[str, str] = {}


def use_colours(colours: Mapping[str, str]) -> None:
    """The endpoint colours every chart drawn next uses (a renderer sets them once per page)."""
    _PAGE_COLOURS.clear()
    _PAGE_COLOURS.update(colours)


def _colours(points: Sequence[FigurePoint]) -> dict[str, str]:
    series = list(dict.fromkeys(point.series for point in points))
    endpoint_of = {point.series: point.endpoint for point in points}
    fallback = {name: PALETTE[index % len(PALETTE)] for index, name in enumerate(series)}
    return {name: _PAGE_COLOURS.get(endpoint_of[name], fallback[name]) for name in series}


def _open(width: float, height: float, title: str) -> list[str]:
    return [
        f'<svg class="figure" viewBox="0 0 {_n(width)} {_n(height)}" width="{_n(width)}" height="{_n(height)}" '
        f'role="img" font-family="sans-serif" font-size="12">',
        f"<title>{escape(title)}</title>",
    ]


def rate_chart(points: Sequence[FigurePoint], title: str) -> str:
    """A dot-and-whisker chart: one row per point, the rate as a dot and its interval as a whisker."""
    label_w, plot_w, right_w, row_h, top, bottom = 270.0, 340.0, 190.0, 22.0, 28.0, 8.0
    width, height = label_w + plot_w + right_w, top + row_h * max(1, len(points)) + bottom
    colours = _colours(points)

    def x(value: float) -> float:
        return label_w + _clamp(value) * plot_w

    out = _open(width, height, title)
    for tick in _TICKS:
        out.append(
            f'<line x1="{_n(x(tick))}" y1="{_n(top - 6)}" x2="{_n(x(tick))}" y2="{_n(height - bottom)}" stroke="#ddd"/>'
        )
        out.append(
            f'<text x="{_n(x(tick))}" y="{_n(top - 10)}" text-anchor="middle" fill="#555">{100 * tick:.0f}%</text>'
        )
    for index, point in enumerate(points):
        y = top + row_h * index + row_h / 2
        colour = colours[point.series]
        out.append(f"<g><title>{escape(point.label)}: {escape(_summary(point))}</title>")
        out.append(
            f'<text x="{_n(label_w - 8)}" y="{_n(y + 4)}" text-anchor="end">{escape(_short(point.label))}</text>'
        )
        if point.low is not None and point.high is not None:
            low, high = x(point.low), x(point.high)
            out.append(
                f'<line x1="{_n(low)}" y1="{_n(y)}" x2="{_n(high)}" y2="{_n(y)}" stroke="{colour}" stroke-width="2"/>'
            )
            for end in (low, high):
                out.append(
                    f'<line x1="{_n(end)}" y1="{_n(y - 5)}" x2="{_n(end)}" y2="{_n(y + 5)}" '
                    f'stroke="{colour}" stroke-width="2"/>'
                )
        if point.value is not None:
            out.append(f'<circle cx="{_n(x(point.value))}" cy="{_n(y)}" r="4.5" fill="{colour}"/>')
        out.append(
            f'<text x="{_n(label_w + plot_w + 10)}" y="{_n(y + 4)}" fill="#333">{escape(_summary(point))}</text>'
        )
        out.append("</g>")
    out.append("</svg>")
    return "\n".join(out)


def family_chart(points: Sequence[FigurePoint], title: str) -> str:
    """Grouped bars: one group per category (family), one bar per series, each with its interval."""
    categories = list(dict.fromkeys(point.category for point in points))
    series = list(dict.fromkeys(point.series for point in points))
    colours = _colours(points)
    bar_w, bar_gap, group_gap = 14.0, 2.0, 18.0
    group_w = max(64.0, len(series) * (bar_w + bar_gap) + group_gap)
    left, top, plot_h, axis_h, legend_row = 44.0, 16.0, 200.0, 24.0, 18.0
    width = max(420.0, left + group_w * len(categories) + 16)
    height = top + plot_h + axis_h + legend_row * len(series) + 10

    def y(value: float) -> float:
        return top + (1.0 - _clamp(value)) * plot_h

    out = _open(width, height, title)
    for tick in _TICKS:
        out.append(f'<line x1="{_n(left)}" y1="{_n(y(tick))}" x2="{_n(width - 8)}" y2="{_n(y(tick))}" stroke="#ddd"/>')
        out.append(
            f'<text x="{_n(left - 6)}" y="{_n(y(tick) + 4)}" text-anchor="end" fill="#555">{100 * tick:.0f}%</text>'
        )
    by_key = {(point.category, point.series): point for point in points}
    chars = int(group_w // 7)
    bars_w = len(series) * (bar_w + bar_gap) - bar_gap
    for c_index, category in enumerate(categories):
        x0 = left + group_w * c_index + (group_w - bars_w) / 2
        centre = x0 + bars_w / 2
        out.append(f"<g><title>{escape(category)}</title>")
        out.append(
            f'<text x="{_n(centre)}" y="{_n(top + plot_h + 16)}" text-anchor="middle">'
            f"{escape(_short(category, chars))}</text>"
        )
        out.append("</g>")
        for s_index, name in enumerate(series):
            point = by_key.get((category, name))
            if point is None:
                continue
            bx = x0 + s_index * (bar_w + bar_gap)
            mid = bx + bar_w / 2
            colour = colours[name]
            out.append(f"<g><title>{escape(category)}, {escape(name)}: {escape(_summary(point))}</title>")
            if point.value is None:
                out.append(f'<text x="{_n(mid)}" y="{_n(y(0) - 4)}" text-anchor="middle" font-size="9">n/a</text>')
            else:
                bar_top = y(point.value)
                out.append(
                    f'<rect x="{_n(bx)}" y="{_n(bar_top)}" width="{_n(bar_w)}" height="{_n(y(0) - bar_top)}" '
                    f'fill="{colour}" fill-opacity="0.75"/>'
                )
            if point.low is not None and point.high is not None:
                low, high = y(point.low), y(point.high)
                out.append(
                    f'<line x1="{_n(mid)}" y1="{_n(low)}" x2="{_n(mid)}" y2="{_n(high)}" '
                    'stroke="#222" stroke-width="1.5"/>'
                )
                for end in (low, high):
                    out.append(
                        f'<line x1="{_n(mid - 4)}" y1="{_n(end)}" x2="{_n(mid + 4)}" y2="{_n(end)}" '
                        'stroke="#222" stroke-width="1.5"/>'
                    )
            out.append("</g>")
    out.append(f'<line x1="{_n(left)}" y1="{_n(y(0))}" x2="{_n(width - 8)}" y2="{_n(y(0))}" stroke="#555"/>')
    legend_top = top + plot_h + axis_h + 4
    for index, name in enumerate(series):
        ly = legend_top + legend_row * index
        out.append(
            f'<rect x="{_n(left)}" y="{_n(ly)}" width="12" height="12" fill="{colours[name]}" fill-opacity="0.75"/>'
        )
        out.append(f'<text x="{_n(left + 18)}" y="{_n(ly + 10)}">{escape(_short(name, 80))}</text>')
    out.append("</svg>")
    return "\n".join(out)


def _scale(points: Sequence[FigurePoint]) -> float:
    # Rates of a few percent would hug the axis on a fixed 0-1 scale; a small set of upper ends keeps it stable.
    top = max((point.value for point in points if point.value is not None), default=0.0)
    return next(upper for upper in _SCALES if top <= upper + 1e-12)


def _value_axis(out: list[str], left: float, right: float, top: float, plot_h: float, upper: float) -> None:
    for index in range(5):
        tick = upper * index / 4
        ty = top + (1.0 - tick / upper) * plot_h
        out.append(f'<line x1="{_n(left)}" y1="{_n(ty)}" x2="{_n(right)}" y2="{_n(ty)}" stroke="#ddd"/>')
        out.append(f'<text x="{_n(left - 6)}" y="{_n(ty + 4)}" text-anchor="end" fill="#555">{100 * tick:.0f}%</text>')


def _legend(
    out: list[str], series: Sequence[str], colours: dict[str, str], left: float, top: float, row: float
) -> None:
    for index, name in enumerate(series):
        ly = top + row * index
        out.append(f'<rect x="{_n(left)}" y="{_n(ly)}" width="12" height="12" fill="{colours[name]}"/>')
        out.append(f'<text x="{_n(left + 18)}" y="{_n(ly + 10)}">{escape(_short(name, 80))}</text>')


def line_chart(points: Sequence[FigurePoint], title: str) -> str:
    """Lines across categories (conditions, in the order given), one per series (endpoint), a dot per value.

    Points without a value are skipped; a line joins a series' remaining
    points in category order. Each dot's tooltip carries its interval and counts.
    """
    categories = list(dict.fromkeys(point.category for point in points))
    series = list(dict.fromkeys(point.series for point in points))
    colours = _colours(points)
    left, top, plot_h, axis_h, legend_row = 52.0, 16.0, 220.0, 28.0, 18.0
    step = max(90.0, 420.0 / max(1, len(categories)))
    width = left + step * len(categories) + 16
    height = top + plot_h + axis_h + legend_row * len(series) + 10
    upper = _scale(points)

    def x(index: int) -> float:
        return left + step * (index + 0.5)

    def y(value: float) -> float:
        return top + (1.0 - min(float(value), upper) / upper) * plot_h

    out = _open(width, height, title)
    _value_axis(out, left, width - 8, top, plot_h, upper)
    chars = int(step // 7)
    for index, category in enumerate(categories):
        out.append(
            f'<text x="{_n(x(index))}" y="{_n(top + plot_h + 18)}" text-anchor="middle">'
            f"<title>{escape(category)}</title>{escape(_short(category, chars))}</text>"
        )
    by_key = {(point.series, point.category): point for point in points}
    for name in series:
        colour = colours[name]
        drawn: list[tuple[int, FigurePoint, float]] = []
        for i, category in enumerate(categories):
            point = by_key.get((name, category))
            if point is not None and point.value is not None:
                drawn.append((i, point, point.value))
        out.append(f"<g><title>{escape(name)}</title>")
        if len(drawn) > 1:
            path = " ".join(f"{_n(x(i))},{_n(y(value))}" for i, _, value in drawn)
            out.append(f'<polyline points="{path}" fill="none" stroke="{colour}" stroke-width="2"/>')
        out.append("</g>")
        for i, point, value in drawn:
            out.append(f"<g><title>{escape(point.label)}: {escape(_summary(point))}</title>")
            out.append(f'<circle cx="{_n(x(i))}" cy="{_n(y(value))}" r="4" fill="{colour}"/>')
            out.append("</g>")
    out.append(
        f'<line x1="{_n(left)}" y1="{_n(top + plot_h)}" x2="{_n(width - 8)}" y2="{_n(top + plot_h)}" stroke="#555"/>'
    )
    _legend(out, series, colours, left, top + plot_h + axis_h + 4, legend_row)
    out.append("</svg>")
    return "\n".join(out)


def spread_chart(points: Sequence[FigurePoint], title: str) -> str:
    """A bar per category (condition): the mean of its series' values, and each value as a dot.

    The bar is the unweighted mean over the series (endpoints) that have a
    value; dots sit side by side in series order so that equal values stay
    visible. There is no whisker: in these reports a whisker is always a 95%
    interval, and the dots already show the spread.
    """
    categories = list(dict.fromkeys(point.category for point in points))
    series = list(dict.fromkeys(point.series for point in points))
    colours = _colours(points)
    left, top, plot_h, axis_h, legend_row = 52.0, 16.0, 220.0, 28.0, 18.0
    step = max(90.0, 420.0 / max(1, len(categories)))
    bar_w = min(56.0, step * 0.6)
    width = left + step * len(categories) + 16
    height = top + plot_h + axis_h + legend_row * len(series) + 10
    upper = _scale(points)

    def y(value: float) -> float:
        return top + (1.0 - min(float(value), upper) / upper) * plot_h

    out = _open(width, height, title)
    _value_axis(out, left, width - 8, top, plot_h, upper)
    chars = int(step // 7)
    for index, category in enumerate(categories):
        centre = left + step * (index + 0.5)
        members = [(p, p.value) for p in points if p.category == category and p.value is not None]
        out.append(
            f'<text x="{_n(centre)}" y="{_n(top + plot_h + 18)}" text-anchor="middle">'
            f"<title>{escape(category)}</title>{escape(_short(category, chars))}</text>"
        )
        if not members:
            continue
        values = [float(value) for _, value in members]
        mean, low, high = sum(values) / len(values), min(values), max(values)
        summary = (
            f"{category}: mean {100 * mean:.1f}% over {len(values)} endpoint{'' if len(values) == 1 else 's'} "
            f"(from {100 * low:.1f}% to {100 * high:.1f}%)"
        )
        out.append(f"<g><title>{escape(summary)}</title>")
        out.append(
            f'<rect x="{_n(centre - bar_w / 2)}" y="{_n(y(mean))}" width="{_n(bar_w)}" '
            f'height="{_n(y(0) - y(mean))}" fill="#999" fill-opacity="0.45"/>'
        )
        out.append(
            f'<text x="{_n(centre + bar_w / 2 + 3)}" y="{_n(y(mean) + 4)}" font-size="10" fill="#333">'
            f"{100 * mean:.1f}%</text>"
        )
        out.append("</g>")
        spacing = min(8.0, (bar_w - 8) / max(1, len(series) - 1)) if len(series) > 1 else 0.0
        for point, value in members:
            dx = (series.index(point.series) - (len(series) - 1) / 2) * spacing
            out.append(f"<g><title>{escape(point.label)}: {escape(_summary(point))}</title>")
            out.append(
                f'<circle cx="{_n(centre + dx)}" cy="{_n(y(value))}" r="3.5" fill="{colours[point.series]}" '
                'stroke="#fff" stroke-width="0.8"/>'
            )
            out.append("</g>")
    out.append(f'<line x1="{_n(left)}" y1="{_n(y(0))}" x2="{_n(width - 8)}" y2="{_n(y(0))}" stroke="#555"/>')
    _legend(out, series, colours, left, top + plot_h + axis_h + 4, legend_row)
    out.append("</svg>")
    return "\n".join(out)
