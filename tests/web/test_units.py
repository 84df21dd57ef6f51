"""The web UI's pure parts: chart geometry, display filters, the page token of an entry."""

from __future__ import annotations

from cogworker_async import api
from cogworker_async.api import browsing
from cogworker_async.web import charts, filters


def test_points_scale_to_the_top_and_span_the_width() -> None:
    assert charts.points([], 10) == ""
    drawn = charts.points([0, 5, 10], 10, width=104, height=104)
    assert drawn == "4.0,100.0 52.0,52.0 100.0,4.0"
    chart = charts.line_chart([("a", "a", [1, 2]), ("b", "b", [0, 7])], ["d1", "d2"])
    assert chart.top == 7
    assert [s.last for s in chart.series] == [2, 7]
    assert charts.line_chart([("a", "a", [0, 0])], ["x", "y"]).top == 1  # never divide by 0


def test_filters_show_bad_values_instead_of_failing() -> None:
    assert filters.when(0) == "1970-01-01 00:00:00Z"
    assert filters.when("nonsense") == "'nonsense'"
    assert filters.when(1e300) == "1e+300"
    assert filters.relative(110, now=100) == "in 10.0s"
    assert filters.relative(40, now=100) == "1m00s ago"
    assert filters.relative(None) == "?"
    assert filters.duration(90061) == "1d01h"
    assert filters.clip("x" * 10, 4) == "xxxx… (10 chars)"
    assert filters.clip(["<a>"]) == '["<a>"]'  # escaped later, by the template
    assert filters.size(2048) == "2.0 KiB"
    assert filters.size(None) == "-"


def test_a_token_names_an_entry_by_score_and_ref() -> None:
    entry = api.parse_entry(b'{"jid":"abc","class":"x","queue":"q","args":[]}', 12.5)
    assert browsing.ref_token(entry) == "12.5~abc"
    garbage = api.parse_entry(b"\x00junk", 3.0)
    assert browsing.ref_token(garbage).startswith("3.0~sha1:")
