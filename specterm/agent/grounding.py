"""Is the agent's answer grounded? The figures and dates it states, checked against what this turn's
tools returned.

An agent that gets ``SQL error: no such column`` and then answers "The average order value is 25.00."
has invented a number; so has one that runs a query, gets 121 and answers 126. Both are worse than an
answer that says what failed. ``ungrounded`` lists the figures and dates of an answer that appear in
neither the user's question nor any tool result of the turn (successful or not); the agent loop
records them on the answer's ``agent_step_finished`` (``ungrounded``), the transcript and the headless
printer mark the answer, ``replay --summary`` counts such answers, and the agent eval fails them.

Evidence is the question and the tool results only: not the model's own call arguments (a query for
February does not ground "February" in an answer about March) and not the retrieved examples (their
numbers belong to other questions). Numbers compare by value at the answer's precision ("25.00"
matches 25, "36.97" matches 36.966, "1,200" matches 1200); a year grounds only a figure written as a year. Dates: ISO dates (2026-03-01) and a month
with a year ("March 2026", matched by "2026-03" in a result too). Names are not checked: telling a
name the model made up from a word of the sentence needs more than a pattern.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

MONTHS = (
    "january",
    "february",
    "march",
    "april",
    "may",
    "june",
    "july",
    "august",
    "september",
    "october",
    "november",
    "december",
)
_ISO_DATE = re.compile(r"\b(\d{4})-(\d{2})-(\d{2})\b")
_MONTH_YEAR = re.compile(r"\b(" + "|".join(MONTHS) + r")\s+(\d{4})\b", re.IGNORECASE)
_YEAR_MONTH = re.compile(r"\b(\d{4})-(\d{2})\b")
_NUMBER = re.compile(r"(?<![\w.])\d{1,3}(?:,\d{3})+(?:\.\d+)?(?![\w])|(?<![\w.])\d+(?:\.\d+)?(?![\w])")


def _dates(text: str) -> tuple[set[str], str]:
    """Dates in ``text`` as ``YYYY-MM-DD`` / ``YYYY-MM``, and the text with them blanked out (so their
    parts are not read as numbers)."""
    found: set[str] = set()

    def iso(m: re.Match) -> str:
        found.add(m.group(0))
        found.add(f"{m.group(1)}-{m.group(2)}")
        return " "

    def month_year(m: re.Match) -> str:
        found.add(f"{m.group(2)}-{MONTHS.index(m.group(1).lower()) + 1:02d}")
        return " "

    def year_month(m: re.Match) -> str:
        found.add(m.group(0))
        return " "

    text = _ISO_DATE.sub(iso, text)
    text = _MONTH_YEAR.sub(month_year, text)
    text = _YEAR_MONTH.sub(year_month, text)
    return found, text


_MONTH = re.compile(r"\b(" + "|".join(MONTHS) + r")\b", re.IGNORECASE)
_YEAR = re.compile(r"\b(19\d\d|20\d\d)\b")


def _month_year_pairs(text: str) -> set[str]:
    """Every month named in ``text`` with every year in it: "between April and June 2025" grounds
    "April 2025" as well as "June 2025" (evidence only; an answer's dates are read as written)."""
    months = {MONTHS.index(m.lower()) + 1 for m in _MONTH.findall(text)}
    return {f"{y}-{m:02d}" for y in _YEAR.findall(text) for m in months}


def _numbers(text: str) -> list[tuple[str, float]]:
    return [(m.group(0), float(m.group(0).replace(",", ""))) for m in _NUMBER.finditer(text)]


def _same(raw: str, value: float, known: float) -> bool:
    decimals = len(raw.split(".")[1]) if "." in raw else 0
    return abs(value - known) <= 0.5 * 10**-decimals + 1e-9


def _as_written_year(raw: str) -> bool:
    """``raw`` could be a year as written: four digits, 1900..2099, no decimals, no separator."""
    return _YEAR.fullmatch(raw) is not None


def ungrounded(answer: str, evidence: Iterable[str]) -> list[str]:
    """The figures and dates of ``answer`` found in no ``evidence`` text, in the answer's own words.

    A year in the evidence (``2026`` from ``strftime('%Y', ...)`` or "orders in 2026") grounds only a
    figure written as a year: "2026.0" or "2,026" is an amount, and a year does not ground it (a model
    that copies the only number it saw into the total has invented the total)."""
    have_dates: set[str] = set()
    have_numbers: list[float] = []
    have_years: list[float] = []
    for text in evidence:
        dates, rest = _dates(text or "")
        have_dates |= dates | _month_year_pairs(text or "")
        for raw, value in _numbers(rest):
            (have_years if _as_written_year(raw) else have_numbers).append(value)
    out: list[str] = []
    for m in [*_ISO_DATE.finditer(answer), *_MONTH_YEAR.finditer(answer)]:
        dates, _ = _dates(m.group(0))
        if not dates & have_dates:
            out.append(m.group(0))
    _, rest = _dates(answer)
    for raw, value in _numbers(rest):
        known = have_numbers + have_years if _as_written_year(raw) else have_numbers
        if not any(_same(raw, value, k) for k in known):
            out.append(raw)
    return list(dict.fromkeys(out))
