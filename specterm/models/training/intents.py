"""What the embedded pair's agents are asked, as *intents*: one question shape each, with the tool
calls that answer it and the answer built from their result.

Every intent has two disjoint lists of phrasings: ``train`` (the corpus and the worked-example pool
are written only from these) and ``heldout`` (only the held-out evaluation asks these). Keeping the
two apart here, per intent, is what makes the held-out split honest by construction; a test checks
that no held-out phrasing is also a training one. Entities (countries and their adjectives,
statuses, products, customers, categories, months, SLOs, loads) are slots filled from the agents'
real data, so SQL and arguments are always executable and their results real.

A phrasing is a ``str.format`` template over the intent's slots (``{w}`` the entity as written,
``{x}`` its value in the data, ...). Intents with no tool (``calls`` empty) are the requests an agent
must answer directly: greetings, thanks, what is not in the data, what is out of its domain.

The intents themselves are written in ``intents_sql`` (sql_analyst), ``intents_ops`` (ops_assistant)
and ``intents_broad`` (the question kinds beyond the shipped pair's training); this module samples
them: ``Slots`` fills their entities, ``sample`` draws a ``Case``, ``rephrase`` and ``add_typo``
reword a training question.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from specterm.models.training.intent_base import COUNTRIES, METHODS, MONTHS, ORDER_STATUS, PAY_STATUS, Intent
from specterm.models.training.intents_broad import BROAD_SQL_INTENTS
from specterm.models.training.intents_broad import SLOTS as BROAD_SLOTS
from specterm.models.training.intents_broad import fill as fill_broad
from specterm.models.training.intents_ops import DOC_HELDOUT, DOC_TRAIN, OPS_INTENTS
from specterm.models.training.intents_sql import SQL_INTENTS

_SQL_ALL = SQL_INTENTS + BROAD_SQL_INTENTS  # once, not per sampled question


def intents_for(agent: str) -> list[Intent]:
    """Every intent of ``agent``; the broad SQL kinds weigh 0 unless a run turns them on by name."""
    return _SQL_ALL if agent == "sql_analyst" else OPS_INTENTS


def _pct(rng: random.Random):
    """An SLO: half the time a common one, else any 90-99.99 with one or two decimals. The spread is
    what makes the model copy the number from the question instead of guessing the common 99.9."""
    if rng.random() < 0.5:
        return rng.choice([99, 99.5, 99.9, 99.95, 99.99, 99.8, 99.0, 99.7, 95, 99.25, 98.5])
    return round(rng.uniform(90, 99.99), rng.choice([1, 2]))


def _num(rng: random.Random, common: list[int], lo: int, hi: int) -> int:
    """Half the time a common value, else uniform in [lo, hi] (copied, not recalled; see ``_pct``)."""
    return rng.choice(common) if rng.random() < 0.5 else rng.randint(lo, hi)


class Slots:
    """Fills an intent's slots from the agents' real data (one instance per corpus build)."""

    def __init__(self, db=None) -> None:
        self.names: list[str] = []
        self.products: list[str] = []
        self.cats: list[str] = []
        if db is not None:
            col = lambda q: [r.split("\t")[0] for r in db.query(q)[0].split("\n")[1:-1]]  # noqa: E731
            self.names = [x for x in col("SELECT name FROM customers") if "'" not in x]
            self.products = [x for x in col("SELECT name FROM products") if "'" not in x]
            self.cats = col("SELECT DISTINCT category FROM products")

    def fill(self, rng: random.Random, slot: str, heldout: bool = False) -> dict:
        if slot in BROAD_SLOTS:
            return fill_broad(rng, slot, self.fill)
        if slot == "country":
            code = rng.choice(list(COUNTRIES))
            names, adjs = COUNTRIES[code]
            return {"x": code, "w": rng.choice(names), "a": rng.choice(adjs)}
        if slot == "ostatus":
            x = rng.choice(list(ORDER_STATUS))
            w = rng.choice(ORDER_STATUS[x])
            return {"x": x, "w": w, "W": w.capitalize()}
        if slot in ("pstatus", "pstatus_verb"):
            x = rng.choice(PAY_STATUS)
            return {"x": x, "w": ("were " + x if x != "failed" else x) if slot == "pstatus_verb" else x}
        if slot == "method":
            x = rng.choice(list(METHODS))
            return {"x": x, "w": rng.choice(METHODS[x])}
        if slot == "product":
            x = rng.choice(self.products)
            return {"x": x, "w": x}
        if slot == "customer":
            x = rng.choice(self.names)
            return {"x": x, "w": x}
        if slot == "customer_product":
            return {"w": rng.choice(self.names), "p": rng.choice(self.products)}
        if slot == "category":
            x = rng.choice(self.cats)
            return {"x": x, "w": x}
        if slot == "month":
            y = rng.choice([2025, 2026])
            m = rng.randint(1, 12 if y == 2025 else 10)
            return {"x": f"{y}-{m:02d}", "w": f"{MONTHS[m - 1]} {y}"}
        if slot == "year":
            y = rng.choice([2024, 2025, 2026])
            return {"x": str(y), "w": str(y)}
        if slot in ("slo", "slo_used"):
            out = {"slo_percent": _pct(rng), "window_days": _num(rng, [7, 14, 28, 30, 30, 90, 365], 1, 366)}
            if slot == "slo_used":
                out["consumed_minutes"] = _num(rng, [5, 10, 12, 20, 30, 45, 60], 1, 500)
            return {**out, "slo": out["slo_percent"], "days": out["window_days"], "used": out.get("consumed_minutes")}
        if slot in ("load", "load_headroom"):
            peak = _num(rng, [90, 200, 500, 900, 1000, 1200, 2500, 5000], 10, 20000)
            per = _num(rng, [50, 100, 150, 200, 250, 400], 5, 1000)
            out = {"peak_rps": peak, "rps_per_replica": per, "peak": peak, "per": per}
            if slot == "load_headroom":
                out["headroom_percent"] = out["h"] = rng.choice([0, 10, 20, 25, 50, 100])
            return out
        if slot == "doc":
            q, doc, words = rng.choice(DOC_HELDOUT if heldout else DOC_TRAIN)
            return {"question": q, "doc": doc, "words": words}
        return {}


@dataclass
class Case:
    """One question, the calls that answer it (arguments still templated by earlier results), the answer."""

    agent: str
    intent: str
    question: str
    calls: list[tuple[str, dict]] = field(default_factory=list)
    answer: str = ""
    slots: dict = field(default_factory=dict)


def sample(
    agent: str,
    rng: random.Random,
    slots: Slots,
    *,
    heldout: bool = False,
    rephrase_rate: float = 0.0,
    weights: dict[str, float] | None = None,
) -> Case:
    """One question of ``agent``: an intent by weight (``weights`` overrides some by name), a phrasing
    from its ``train`` or ``heldout`` list (a training one reworded by ``rephrase`` with probability
    ``rephrase_rate``), slots filled from the data."""
    intents = intents_for(agent)
    weights = weights or {}
    it = rng.choices(intents, weights=[weights.get(i.name, i.weight) for i in intents])[0]
    s = slots.fill(rng, it.slot, heldout)
    if it.name == "docs":
        question = s["question"]
        s["query"] = search_query(question)
    else:
        phrasings = it.heldout if heldout else it.train
        template = rng.choice(phrasings)
        if not heldout and rng.random() < rephrase_rate:
            template = rephrase(rng, template)
        question = template.format(**s)
    return Case(agent, it.name, question, it.calls(s), it.answer, s)


STOP = set(
    "a an the of do does we our is are was were what how when who which can must to for in on "
    "i should my me be it at by with there any".split()
)


def search_query(question: str) -> str:
    """The search_docs query the corpus writes for a question: its content words."""
    import re

    return " ".join(w for w in re.findall(r"[\w%.]+", question.lower()) if w not in STOP)[:100]


# Words people use for the shop's nouns and verbs, swapped into a training template (never into its
# slots, so entities stay exact). General vocabulary, not the held-out templates' wording: the point
# is that a question's words vary, so the model learns to rely on the retrieved example and the
# entity rather than on a memorised sentence.
SYNONYMS = {
    "customers": ["clients", "buyers", "shoppers"],
    "customer": ["client", "buyer"],
    "products": ["items", "goods"],
    "product": ["item"],
    "orders": ["purchases"],
    "payments": ["transactions"],
    "How many": ["how many"],
    "What is": ["What's", "Tell me", "whats"],
    "total": ["overall", "combined"],
    "costs": ["is priced at"],
    "most": ["the most"],
    "downtime": ["outage time"],
    "replicas": ["instances", "pods"],
    "SLO": ["availability target", "SLA"],
}
OPENERS = [
    "Can you tell me: ",
    "Please tell me: ",
    "I'd like to know: ",
    "Quick question: ",
    "Hey, ",
    "Could you check: ",
    "I need to know: ",
    "Question: ",
    "Using the data: ",
]
CLOSERS = [" please", " thanks", " - thanks!", " (quick one)", " asap"]


def rephrase(rng: random.Random, template: str) -> str:
    """Reword a training template as a user might: one word or phrase swapped for a synonym, an
    opener before it, a closer after it (each at random; at least one)."""
    import re

    out = template
    kinds = [k for k in range(3) if rng.random() < 0.5] or [rng.randrange(3)]
    if 0 in kinds:
        words = [w for w in SYNONYMS if re.search(rf"(?<![\w{{]){re.escape(w)}(?![\w}}])", out)]
        if words:
            w = rng.choice(words)
            out = re.sub(rf"(?<![\w{{]){re.escape(w)}(?![\w}}])", rng.choice(SYNONYMS[w]), out, count=1)
    if 1 in kinds:
        first = out.split(" ", 1)[0]
        if first in ("What", "What's", "How", "Which", "Who", "Where", "Tell", "Count", "Give", "List", "Name"):
            out = out[0].lower() + out[1:]
        out = rng.choice(OPENERS) + out
    if 2 in kinds:
        end = len(out.rstrip("?.!"))
        out = out[:end] + rng.choice(CLOSERS) + out[end:]
    return out


def add_typo(rng: random.Random, text: str) -> str:
    """Perturb a training question as people type: a dropped or swapped letter in a longer word,
    lower case, no final question mark. Entity words (with capitals or digits) are left alone so the
    calls stay right."""
    words = text.split(" ")
    kind = rng.randrange(4)
    if kind == 0:
        idx = [i for i, w in enumerate(words) if len(w) > 4 and w.isalpha() and w.islower()]
        if idx:
            i = rng.choice(idx)
            w, j = words[i], rng.randrange(1, len(words[i]) - 2)
            words[i] = w[:j] + w[j + 1] + w[j] + w[j + 2 :] if rng.random() < 0.5 else w[:j] + w[j + 1 :]
        return " ".join(words)
    if kind == 1:
        return text[0].lower() + text[1:]
    if kind == 2:
        return text.rstrip("?.!")
    return text
