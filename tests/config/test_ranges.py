"""The range and placement-string language: what parses to what, and what is refused with which reason."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rlplace.config.ranges import MAX_RANK, RangeError, format_ranks, parse_placement, parse_ranks
from rlplace.model import Segment


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (3, (3,)),
        ("0-3", (0, 1, 2, 3)),
        ("0-1, 4-5", (0, 1, 4, 5)),
        (" 2 - 3 ,0", (2, 3, 0)),  # written order is kept
        ([0, 1, "4-5"], (0, 1, 4, 5)),
        ("7", (7,)),
    ],
)
def test_parse_ranks(value, expected):
    assert parse_ranks(value) == expected


@pytest.mark.parametrize(
    ("value", "fragment"),
    [
        ("5-2", "runs backwards; write 2-5"),
        ("0-3, 2", "rank 2 appears twice"),
        ([1, "0-1"], "rank 1 appears twice"),
        ("", "empty"),
        ([], "empty"),
        ("0-3,,4", "empty part"),
        ("x", "'x' is not a rank"),
        ("-2", "negative"),
        (-2, "negative"),
        (True, "boolean"),
        (1.5, "float"),
        ([["0"]], "list element"),
        (f"0-{MAX_RANK + 1}", "too large"),
    ],
)
def test_parse_ranks_refuses(value, fragment):
    with pytest.raises(RangeError, match=None) as e:
        parse_ranks(value)
    assert fragment in str(e.value)


def test_parse_placement_forms():
    assert parse_placement("0-1:0-199,2-3:200-399") == (
        Segment((0, 1), tuple(range(200))),
        Segment((2, 3), tuple(range(200, 400))),
    )
    assert parse_placement("all") == (Segment(None),)
    assert parse_placement("all:0-7") == (Segment(None, tuple(range(8))),)
    assert parse_placement(0) == (Segment((0,)),)
    assert parse_placement("0-3:0-1") == (Segment((0, 1, 2, 3), (0, 1)),)  # one process owns two resources
    assert parse_placement("0-1,2-3:2-5") == (Segment((0, 1)), Segment((2, 3), (2, 3, 4, 5)))  # numbering continues


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("0-2:0-3", "4 processes on 3 resources"),
        ("0-1:1-2", "must continue from 0"),
        ("0-1,2:0", "must continue from 2"),
        ("all,1", "'all' must be the whole placement"),
        ("0:1:2", "more than one ':'"),
        (":0-3", "no resource ranks"),
        ("0-3:", "no process ranks"),
        ("0-1,1", "rank 1 appears twice"),
        ("0-1,", "empty segment"),
        ("  ", "empty"),
        ([0, 1], "not a placement string"),
        ("ALL", "'ALL' is not a rank"),
    ],
)
def test_parse_placement_refuses(text, fragment):
    with pytest.raises(RangeError) as e:
        parse_placement(text)
    assert fragment in str(e.value)


def test_format_ranks():
    assert format_ranks(range(16)) == "0-15"
    assert format_ranks(range(16), block=8) == "0-7, 8-15"
    assert format_ranks([0, 1, 2, 5, 7, 8]) == "0-2, 5, 7-8"
    assert format_ranks([]) == ""


@settings(deadline=None)  # the CI machine is shared: timing says nothing here
@given(st.lists(st.integers(0, 300), unique=True, min_size=1), st.sampled_from([None, 4, 8]))
def test_format_ranks_is_the_inverse_of_parse_ranks(ranks, block):
    assert parse_ranks(format_ranks(ranks, block=block)) == tuple(ranks)
