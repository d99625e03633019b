"""Ungrounded answers: the figures and dates an agent states that its tools never returned. The
cases are the ones a new user hit (issue 35) plus the forms a right answer takes."""

from __future__ import annotations

import pytest

from specterm.agent.grounding import ungrounded


@pytest.mark.parametrize(
    "answer, evidence, flagged",
    [
        # a figure after a failed call: the error holds no number
        (
            "The average order value is 25.00.",
            ["what's the average order value for customers in Germany?", "SQL error: no such column: country"],
            ["25.00"],
        ),
        # the wrong month queried and a number that is not the result
        (
            "126 orders were placed in February 2026.",
            ["How many orders were placed in March 2026?", "count\n121"],
            ["February 2026", "126"],
        ),
        # right: the result's number, the question's month
        ("121 orders were placed in March 2026.", ["How many orders were placed in March 2026?", "count\n121"], []),
        # rounding, thousands separators and ISO dates match by value
        ("The total is 36.97 over 1,200 items since 2026-03-01.", ["totals?", "36.966\t1200\t2026-03-01"], []),
        ("Revenue was 37 in 2026-03.", ["revenue in March 2026?", "36.966"], []),
        # a number from the question is grounded ("top 3"), a made-up one is not
        ("The top 3 products sold 65, 40 and 12 units.", ["top 3 products?", "webcam\t65\nmouse\t40"], ["12"]),
        # a month range in the question grounds each month with its year
        (
            "45 orders were placed between April 2025 and June 2025.",
            ["how many orders were placed between April and June 2025?", "count(*)\n45"],
            [],
        ),
        (
            "45 orders were placed in May 2025.",
            ["how many orders were placed between April and June 2025?", "45"],
            ["May 2025"],
        ),
        # a year grounds a year, not an amount (issue 42 item 9: "2026.0" stated as a total, where the
        # results held 2026 only as the year of a date)
        ("The total was 2026.0.", ["total of orders this year?", "y\tcount(*)\n2026\t775"], ["2026.0"]),
        ("The total was 2,026.", ["total in 2026?", "sum\n849.96"], ["2,026"]),
        ("775 orders were placed in 2026.", ["orders per year?", "y\tcount(*)\n2026\t775"], []),
        ("It came to 2026.00 in total.", ["sum of 2026-01-16's orders?", "sum\n849.96"], ["2026.00"]),
        # a year-valued result that is a count still grounds it written as a count
        ("There are 2026 rows.", ["how many rows?", "count(*)\n2026"], []),
        # no figures, nothing to check
        ("No deploys on Fridays or during a freeze.", ["Can we deploy on Fridays?"], []),
    ],
)
def test_figures_no_tool_returned_are_flagged(answer, evidence, flagged):
    assert ungrounded(answer, evidence) == flagged


def test_precision_is_the_answers():
    assert ungrounded("about 25", ["25.4"]) == []  # 25 covers 24.5 .. 25.5
    assert ungrounded("25.0", ["25.4"]) == ["25.0"]  # one decimal claims more
    assert ungrounded("2 orders", ["order ids: 12, 21"]) == ["2"]  # digits inside other numbers are not it
