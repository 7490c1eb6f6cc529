"""Charts drawn on the server as SVG, so a page shows them without a script: pure functions from
numbers to markup, each with a title, a description and the table a screen reader reads instead.

Amounts are atomic units of USDC (6 decimals), labelled in USD."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date
from html import escape

from server.kit.money import format_usd

# Fills that stay apart for the common kinds of colour blindness (Okabe and Ito's palette); the
# legend and the table say which agent each is, so no reading depends on telling them apart.
FILLS = ("#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442", "#000000")
# Small enough a drawing that its 14-unit labels stay readable when a phone shrinks it to fit.
WIDTH = 480
HEIGHT = 240
FONT = 14
_LEFT, _RIGHT, _TOP, _BOTTOM = 60, 8, 12, 32
_TICKS = 4


@dataclass(frozen=True)
class Series:
    """One stack of the chart: a label (an agent's name) and its amount on each day."""

    label: str
    values: tuple[int, ...]


@dataclass(frozen=True)
class StackedBars:
    """A chart ready for a page: the SVG markup and the rows of its table fallback."""

    svg: str
    days: tuple[date, ...]
    series: tuple[Series, ...]
    totals: tuple[int, ...]  # per day, every series together
    ticks: tuple[int, ...]


def axis_ticks(maximum: int, count: int = _TICKS) -> tuple[int, ...]:
    """Round steps from 0 that reach `maximum`: 1, 2 or 5 times a power of ten (in atomic units,
    never below one cent), `count` steps long. An empty chart still has an axis up to a cent."""
    if maximum < 0:
        raise ValueError("a spend chart has no negative amounts")
    step = 10_000  # one cent
    while step * count < maximum:
        for factor in (2, 5 / 2, 2):  # 1 -> 2 -> 5 -> 10
            step = int(step * factor)
            if step * count >= maximum:
                break
    return tuple(step * index for index in range(count + 1))


def usd_label(atomic: int) -> str:
    return f"${format_usd(atomic, atomic=True)}"


def stacked_bars(
    days: Sequence[date], series: Sequence[Series], *, title: str, description: str
) -> StackedBars:
    """Bars per day, one stack per series, on a labelled amount axis and day axis."""
    if any(len(item.values) != len(days) for item in series):
        raise ValueError("every series has one value per day")
    if any(value < 0 for item in series for value in item.values):
        raise ValueError("a spend chart has no negative amounts")
    totals = tuple(sum(item.values[index] for item in series) for index in range(len(days)))
    ticks = axis_ticks(max(totals, default=0))
    top = ticks[-1]
    plot_w = WIDTH - _LEFT - _RIGHT
    plot_h = HEIGHT - _TOP - _BOTTOM
    base = _TOP + plot_h

    def y_of(amount: int) -> float:
        return base - plot_h * amount / top

    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="chart" viewBox="0 0 {WIDTH} {HEIGHT}" '
        f'role="img" aria-labelledby="chart-title chart-desc">',
        f'<title id="chart-title">{escape(title)}</title>',
        f'<desc id="chart-desc">{escape(description)}</desc>',
    ]
    for tick in ticks:
        y = y_of(tick)
        parts.append(
            f'<line class="grid" x1="{_LEFT}" y1="{y:.1f}" x2="{WIDTH - _RIGHT}" y2="{y:.1f}" '
            'stroke="#767676" stroke-width="0.5"/>'
        )
        parts.append(
            f'<text class="tick" x="{_LEFT - 6}" y="{y + 4:.1f}" text-anchor="end" font-size="{FONT}" '
            f'fill="#1a1a1a">{escape(usd_label(tick))}</text>'
        )
    labelled = -7
    slot = plot_w / max(len(days), 1)
    bar = slot * 0.7
    for index, day in enumerate(days):
        x = _LEFT + slot * index + (slot - bar) / 2
        stacked = 0
        for number, item in enumerate(series):
            amount = item.values[index]
            if amount == 0:
                continue
            y_top, y_bottom = y_of(stacked + amount), y_of(stacked)
            stacked += amount
            parts.append(
                f'<rect class="bar" x="{x:.1f}" y="{y_top:.1f}" width="{bar:.1f}" '
                f'height="{y_bottom - y_top:.1f}" fill="{FILLS[number % len(FILLS)]}">'
                f"<title>{escape(item.label)}, {day.isoformat()}: {escape(usd_label(amount))}</title></rect>"
            )
        # Every seventh day, and the last unless it would crowd the one before.
        if index % 7 == 0 or (index == len(days) - 1 and index - labelled >= 4):
            labelled = index
            parts.append(
                f'<text class="day" x="{x + bar / 2:.1f}" y="{HEIGHT - 10}" text-anchor="middle" '
                f'font-size="{FONT}" fill="#1a1a1a">{day.strftime("%m-%d")}</text>'
            )
    parts.append(
        f'<line class="axis" x1="{_LEFT}" y1="{base}" x2="{WIDTH - _RIGHT}" y2="{base}" '
        'stroke="#1a1a1a" stroke-width="1"/>'
    )
    parts.append("</svg>")
    return StackedBars("".join(parts), tuple(days), tuple(series), totals, ticks)


def fill_of(number: int) -> str:
    """The fill of the `number`th series, for the legend beside the chart."""
    return FILLS[number % len(FILLS)]
