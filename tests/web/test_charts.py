"""The spend chart drawn on the server: stacked bars per day and agent, round axis steps, labels,
a title and description, and nothing a hostile agent name can break out of."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from datetime import date, timedelta

import pytest

from server.web.charts import Series, axis_ticks, stacked_bars

SVG = "{http://www.w3.org/2000/svg}"
DAYS = tuple(date(2026, 11, 1) + timedelta(days=n) for n in range(30))


def _values(**by_day: int) -> tuple[int, ...]:
    values = [0] * 30
    for key, amount in by_day.items():
        values[int(key[1:])] = amount
    return tuple(values)


@pytest.mark.parametrize(
    ("maximum", "ticks"),
    [
        (0, (0, 10_000, 20_000, 30_000, 40_000)),
        (40_000, (0, 10_000, 20_000, 30_000, 40_000)),
        (40_001, (0, 20_000, 40_000, 60_000, 80_000)),
        (150_000, (0, 50_000, 100_000, 150_000, 200_000)),
        (3_500_000, (0, 1_000_000, 2_000_000, 3_000_000, 4_000_000)),
        (9_000_000, (0, 5_000_000, 10_000_000, 15_000_000, 20_000_000)),
    ],
)
def test_the_amount_axis_steps_are_round_and_reach_the_highest_day(
    maximum: int, ticks: tuple[int, ...]
) -> None:
    assert axis_ticks(maximum) == ticks


def test_bars_stack_per_day_in_proportion_to_the_amounts() -> None:
    chart = stacked_bars(
        DAYS,
        [Series("alpha", _values(d0=10_000, d2=30_000)), Series("beta", _values(d0=30_000))],
        title="Spend, last 30 days",
        description="Per day and agent.",
    )
    assert chart.totals[:3] == (40_000, 0, 30_000)
    root = ET.fromstring(chart.svg)
    assert root.get("role") == "img"
    assert root.find(f"{SVG}title").text == "Spend, last 30 days"  # type: ignore[union-attr]
    assert root.find(f"{SVG}desc").text == "Per day and agent."  # type: ignore[union-attr]
    bars = root.findall(f"{SVG}rect")
    assert [bar.find(f"{SVG}title").text for bar in bars] == [  # type: ignore[union-attr]
        "alpha, 2026-11-01: $0.01",
        "beta, 2026-11-01: $0.03",
        "alpha, 2026-11-03: $0.03",
    ]
    heights = [float(bar.get("height", "0")) for bar in bars]
    assert heights[1] == pytest.approx(3 * heights[0], rel=0.01)
    assert heights[2] == pytest.approx(heights[1], rel=0.01)
    # The day's second stack sits right on top of its first.
    assert float(bars[0].get("y", "0")) == pytest.approx(float(bars[1].get("y", "0")) + heights[1], abs=0.11)
    # The 40,000 day reaches the top tick exactly (the axis is 0..0.04).
    assert chart.ticks[-1] == 40_000
    top_line = min(float(line.get("y1", "0")) for line in root.findall(f"{SVG}line"))
    assert float(bars[1].get("y", "0")) == pytest.approx(top_line, abs=0.11)


def test_the_axes_are_labelled_in_dollars_and_by_day() -> None:
    chart = stacked_bars(DAYS, [Series("alpha", _values(d5=2_500_000))], title="t", description="d")
    texts = [text.text for text in ET.fromstring(chart.svg).iter(f"{SVG}text")]
    assert texts[:5] == ["$0.00", "$1.00", "$2.00", "$3.00", "$4.00"]
    assert texts[5:] == ["11-01", "11-08", "11-15", "11-22", "11-29"]  # 11-30 would crowd 11-29


def test_an_empty_month_draws_an_axis_and_no_bar() -> None:
    chart = stacked_bars(DAYS, [], title="t", description="nothing yet")
    root = ET.fromstring(chart.svg)
    assert root.findall(f"{SVG}rect") == []
    assert chart.totals == (0,) * 30


def test_names_are_escaped_so_an_agent_name_cannot_add_markup() -> None:
    chart = stacked_bars(DAYS, [Series('<script>x</script>"&', _values(d0=1))], title="<b>", description="&")
    root = ET.fromstring(chart.svg)  # still one well-formed SVG document
    assert "<script>" not in chart.svg
    assert root.find(f"{SVG}rect/{SVG}title").text.startswith('<script>x</script>"&')  # type: ignore[union-attr]


def test_values_must_match_the_days_and_never_be_negative() -> None:
    with pytest.raises(ValueError, match="one value per day"):
        stacked_bars(DAYS, [Series("a", (1, 2))], title="t", description="d")
    with pytest.raises(ValueError, match="negative"):
        stacked_bars(DAYS, [Series("a", _values(d0=-1))], title="t", description="d")


def test_the_last_day_is_labelled_when_it_has_room() -> None:
    days = DAYS[:26]
    chart = stacked_bars(days, [], title="t", description="d")
    texts = [text.text for text in ET.fromstring(chart.svg).iter(f"{SVG}text")]
    assert texts[5:] == ["11-01", "11-08", "11-15", "11-22", "11-26"]
