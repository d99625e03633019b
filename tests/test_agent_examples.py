"""Worked examples (``agent/examples.py``) and the intents the embedded pair is trained and judged
on (``models/training/intents*.py``): the held-out phrasings are apart from the training ones, every intent's
calls run on the real tools, examples load with one-line errors and are retrieved by meaning."""

from __future__ import annotations

import random
import re

import pytest

from specterm.agent.loader import load_agent
from specterm.errors import ConfigError


@pytest.mark.parametrize("agent", ["sql_analyst", "ops_assistant"])
def test_heldout_phrasings_never_appear_in_training(agent):
    from specterm.agent.tools import ToolBox
    from specterm.models.training.intents import DOC_HELDOUT, DOC_TRAIN, Slots, intents_for, sample

    for it in intents_for(agent):
        assert not set(it.train) & set(it.heldout), it.name
    assert not {q for q, *_ in DOC_TRAIN} & {q for q, *_ in DOC_HELDOUT}
    a = load_agent(agent)
    slots = Slots(ToolBox(a).db() if a.database else None)
    rng = random.Random(0)
    # every intent drawn, the ones that weigh 0 by default (intents_broad) included
    every = {it.name: 1.0 for it in intents_for(agent)}
    train = {
        sample(agent, rng, slots, rephrase_rate=r, weights=w).question
        for r in (0.0, 1.0)
        for w in (None, every)
        for _ in range(3000)
    }
    held = {sample(agent, rng, slots, heldout=True, weights=w).question for w in (None, every) for _ in range(300)}
    assert not train & held
    shipped = {
        line.split(" = ", 1)[1].strip('"')
        for line in (a.path / "examples.toml").read_text().splitlines()
        if line.startswith("question = ")
    }
    assert len(shipped) > 100 and not shipped & held


def test_rewording_keeps_every_entity_slot_and_its_unit():
    """``intents.rephrase`` changes words around the slots, never the slots: the reworded template
    names the same slots and formats with the same values, and a number keeps the word after it."""
    import re
    import string

    from specterm.models.training.intents import OPS_INTENTS, SQL_INTENTS, rephrase
    from specterm.models.training.intents_broad import BROAD_SQL_INTENTS

    rng = random.Random(0)
    slots = lambda t: sorted(f for _, f, _, _ in string.Formatter().parse(t) if f)  # noqa: E731
    changed = 0
    for it in SQL_INTENTS + BROAD_SQL_INTENTS + OPS_INTENTS:
        for template in it.train:
            for _ in range(20):
                out = rephrase(rng, template)
                changed += out != template
                assert slots(out) == slots(template), (template, out)
                for unit in re.findall(r"\{\w+\}%? (rps|days|minutes)", template):
                    assert re.search(r"\{\w+\}%? (" + unit + r"|requests per second|req/s|min)\b", out), (template, out)
    assert changed > 1000


@pytest.mark.parametrize("agent", ["sql_analyst", "ops_assistant"])
def test_every_intent_runs_on_the_real_tools(agent):
    """Each intent, a few entities each: every call succeeds and the answer carries a value."""
    from specterm.agent.tools import ToolBox
    from specterm.models.training.corpus import resolve
    from specterm.models.training.intents import Case, Slots, intents_for

    a = load_agent(agent)
    box = ToolBox(a)
    box.store()  # the index and embedder load outside search_docs' 5 s timeout, as the loop's retrieval does
    slots = Slots(box.db() if a.database else None)
    rng = random.Random(1)
    for it in intents_for(agent):
        for _ in range(3):
            s = slots.fill(rng, it.slot)
            if it.name == "docs":
                s["query"] = s["question"]
            phr = (it.train or ("{question}",))[0]
            case = Case(agent, it.name, phr.format(**s), it.calls(s), it.answer, s)
            steps, answer = resolve(box, case)
            for tool, args, res in steps:
                assert box.call(tool, args).ok, (it.name, tool, args, res)
                assert "'{r1}'" not in str(args)
            if steps and steps[-1][0] == "query_sql":
                assert res.split("\n")[1].strip(), (it.name, args)  # a value came back
            assert answer and "{" not in answer, (it.name, answer)


def test_docs_answers_quote_the_sentence_that_answers():
    """With ``answer_words`` the oracle's docs answer is the sentence holding the answer's words
    wherever the result shows it; word overlap alone quoted another sentence for half the training
    questions (kept as the default: the shipped embedded pair was trained on it)."""
    from specterm.agent.tools import ToolBox
    from specterm.models.training.corpus import resolve
    from specterm.models.training.intents import DOC_TRAIN, OPS_INTENTS, Case, search_query

    a = load_agent("ops_assistant")
    box = ToolBox(a)
    box.store()
    docs = next(it for it in OPS_INTENTS if it.name == "docs")
    right = {False: 0, True: 0}
    shown = 0
    for question, doc, words in DOC_TRAIN:
        s = {"question": question, "doc": doc, "words": words, "query": search_query(question)}
        case = Case("ops_assistant", "docs", question, docs.calls(s), docs.answer, s)
        for flag in right:
            steps, answer = resolve(box, case, answer_words=flag)
            right[flag] += all(w in answer.lower() for w in words)
        shown += all(w in steps[-1][2].lower() for w in words)
    assert right[True] == shown > right[False]
    assert shown >= 15  # the rest lie past the result's cut (``result_chars``): nothing to quote


def test_slipped_queries_fail_on_the_real_database_and_only_the_fix_is_trained():
    """``recover_rate``: a transcript starts with a slipped query (an SQLite or schema mistake,
    entities untouched), the real error, then the right query; the slip is not a trained span.
    Off (the default), the corpus is what it was: the shipped embedded pair's ``models train``."""
    from specterm.models.training.corpus import generate, slip

    rng = random.Random(0)
    sql = "SELECT round(avg(price), 2) FROM products WHERE category = 'price avg('"
    slips = {slip(rng, sql) for _ in range(200)}
    assert all(s.endswith("= 'price avg('") for s in slips) and sql not in slips and len(slips) >= 5
    assert slip(rng, "SELECT 1") is None

    plain = generate(3, 30, 0, example_k=0)
    assert generate(3, 30, 0, example_k=0, recover_rate=0.0) == plain
    slipped = [t for t in generate(3, 30, 0, example_k=0, recover_rate=1.0) if "error: SQL error" in t.text]
    assert len(slipped) >= 10
    for t in slipped:
        calls = [t.text[a:b] for a, b in t.calls]
        head, tail = t.text.split("error: SQL error", 1)
        bad = head.rsplit('{"tool":"query_sql"', 1)[1]
        assert not any(bad in c for c in calls)  # the slip is context, not a target
        assert calls[-2].startswith('{"tool":"query_sql"') and calls[-2] in tail  # the fix is
        assert calls[-1].startswith('{"answer"')


def test_contrast_examples_call_the_same_tool_with_other_arguments():
    """``contrast_rate``: the retrieved examples call the question's tool with other arguments (an
    SLO budget without the minutes used for a question that gives them), so the trained call cannot
    be copied from them. Off (the default), retrieval is the nearest examples, as before."""
    import json

    from specterm.models.training.corpus import _shape, contrasts, generate

    plain, contrast = generate(5, 0, 40, example_k=2), generate(5, 0, 40, example_k=2, contrast_rate=1.0)
    assert generate(5, 0, 40, example_k=2, contrast_rate=0.0) == plain
    budgets = 0
    for c in contrast:  # every SLO budget question: the pool has budgets with and without minutes used
        own = [json.loads(c.text[a:b]) for a, b in c.calls[:-1]]
        own_shape = tuple((x["tool"], tuple(sorted(x["arguments"]))) for x in own)
        if {t for t, _ in own_shape} != {"sla_budget"}:
            continue
        budgets += 1
        shown = [_shape(line.split(" ", 1)[1]) for line in c.text.splitlines() if line.startswith("[example]")]
        assert len(shown) == 2 and all(s != own_shape and s[0][0] == "sla_budget" for s in shown), c.text
    assert budgets >= 5
    budget = (("sla_budget", ("slo_percent", "window_days")),)
    left = (("sla_budget", ("consumed_minutes", "slo_percent", "window_days")),)
    query = (("query_sql", ("sql",)),)
    assert contrasts(budget, left) and contrasts(left, budget) and not contrasts(budget, budget)
    assert not contrasts(query, query + query) and not contrasts(query + query, query)  # not a shape: a plan


def test_lower_case_questions_keep_the_datas_spelling_in_the_calls():
    """``lower_rate``: questions typed all in lower case, entities too; the calls still name the
    data's values. Off (the default), the corpus is unchanged."""
    from specterm.models.training.corpus import generate

    plain = generate(3, 30, 0, example_k=0)
    assert generate(3, 30, 0, example_k=0, lower_rate=0.0) == plain
    lower = generate(3, 30, 0, example_k=0, lower_rate=1.0)
    questions = [t.text.split("<|user|>\n", 1)[1].split("\n", 1)[0] for t in lower]
    assert all(q == q.lower() for q in questions)
    calls = " ".join(t.text[a:b] for t in lower for a, b in t.calls)
    assert re.search(r"country = '[A-Z]{2}'", calls) and re.search(r"name = '[A-Z][a-z]+ [A-Z]", calls)


def test_intent_weights_bring_in_the_cheapest_product_plan():
    """``weights`` overrides intent weights by name: ``orders_for_min_product`` (weight 0, so not in
    the default corpus) is two dependent queries, the second naming the first one's product."""
    from specterm.agent.tools import ToolBox
    from specterm.models.training.corpus import generate, parse_weight

    assert "orders_for_min_product" not in {t.intent for t in generate(3, 60, 0, example_k=0)}
    weighted = generate(3, 20, 0, example_k=0, weights={"orders_for_min_product": 1e9})
    assert {t.intent for t in weighted} == {"orders_for_min_product"}
    db = ToolBox(load_agent("sql_analyst")).db()
    cheapest = db.query("SELECT name FROM products ORDER BY price ASC LIMIT 1")[0].split("\n")[1]
    for t in weighted:
        first, second, answer = (t.text[a:b] for a, b in t.calls)
        assert "ORDER BY price ASC LIMIT 1" in first and f"products.name = '{cheapest}'" in second
        assert cheapest in answer
    with pytest.raises(ValueError, match="no such intent: nope"):
        generate(3, 5, 0, example_k=0, weights={"nope": 1.0})
    assert parse_weight("orders_for_max_product=2.5") == ("orders_for_max_product", 2.5)
    for bad in ("orders_for_max_product", "=2", "x=two"):
        with pytest.raises(ValueError, match="expected INTENT=WEIGHT"):
            parse_weight(bad)


def test_heldout_cases_carry_gold_from_the_data():
    from specterm.models.training.corpus import heldout_cases

    sql = heldout_cases("sql_analyst", 40)
    assert len({c["question"] for c in sql}) == 40
    assert any(c.get("tool") == "none" for c in sql) and sum("sql" in c for c in sql) > 25
    ops = heldout_cases("ops_assistant", 30)
    assert {c["tool"] for c in ops} >= {"sla_budget", "capacity", "search_docs"}
    assert heldout_cases("ops_assistant", 30) == ops  # deterministic


def test_examples_file_errors_are_one_line(tmp_path):
    from specterm.agent.examples import load_examples

    agent = load_agent("sql_analyst")
    cases = {
        "[[example]\n": "not valid TOML",
        '[[example]]\nquestion = "q"\n': "needs calls or an answer",
        '[[example]]\nquestion = "q"\ncalls = [{ tool = "drop_db" }]\n': "unknown tool 'drop_db'",
        '[[example]]\nquestion = ""\nanswer = "a"\n': "example[0].question",
        '[[example]]\nquestion = "q"\nanswer = "a"\nextra = 1\n': "example[0].extra",
    }
    for text, expected in cases.items():
        path = tmp_path / "examples.toml"
        path.write_text(text)
        with pytest.raises(ConfigError) as err:
            load_examples(path, agent)
        assert expected in str(err.value) and str(path) in str(err.value) and "\n" not in str(err.value)


def test_agent_names_a_missing_examples_file(tmp_path):
    folder = tmp_path / "mini"
    (folder / "docs").mkdir(parents=True)
    (folder / "docs" / "a.md").write_text("# A\n\nSome text.\n")
    (folder / "agent.toml").write_text(
        'system = "s"\n[retrieval]\ntop_k = 1\nexamples = "nope.toml"\n'
        '[[tools]]\nname = "search_docs"\ndescription = "d"\nhandler = "docs.search"\n'
        'parameters = { type = "object", properties = { query = { type = "string" } } }\n'
    )
    with pytest.raises(ConfigError, match=r"retrieval\.examples: file not found"):
        load_agent(folder)


def test_nearest_example_has_the_questions_intent(tmp_path, monkeypatch):
    """Real embeddings: a question phrased unlike any example still retrieves its intent's SQL."""
    monkeypatch.setenv("SPECTERM_CACHE_DIR", str(tmp_path))
    from specterm.agent.tools import ToolBox

    box = ToolBox(load_agent("sql_analyst"))  # example_k = 2, as the embedded pair was trained
    assert box.agent.retrieval.example_k == 2
    hits = box.examples().search("how many of our clients are located in Japan", 2)
    assert [h.doc for h in hits] == ["example", "example"]
    assert "FROM customers WHERE country =" in hits[0].text
    ops = ToolBox(load_agent("ops_assistant")).examples().search("allowed downtime at 99.9% for 30 days", 1)
    assert "sla_budget" in ops[0].text
    # What the loop puts in the context: the examples first (fit_prompt drops from the end), then docs.
    context = box.retrieve("how many of our clients are located in Japan")
    assert [p.doc for p in context] == ["example", "example", "schema.md"]


@pytest.mark.parametrize("name", ["eval_natural.toml", "eval_natural2.toml"])
def test_the_natural_question_sets_are_in_no_training_phrasing_nor_example(name):
    """agents/sql_analyst/eval_natural*.toml measure new questions: none of them (as typed, or
    lower-cased) is a worked example or a phrasing the corpus generator can produce from any intent
    (the broad kinds that weigh 0 by default included), and every gold query runs on the shipped
    database."""
    import tomllib

    from specterm.agent.tools import ToolBox
    from specterm.models.training.intents import Slots, intents_for, sample

    a = load_agent("sql_analyst")
    cases = tomllib.loads((a.path / name).read_text())["case"]
    asked = {c["question"].lower().rstrip("?") for c in cases}
    shipped = {
        line.split(" = ", 1)[1].strip('"').lower().rstrip("?")
        for line in (a.path / "examples.toml").read_text().splitlines()
        if line.startswith("question = ")
    }
    box = ToolBox(a)
    slots, rng = Slots(box.db()), random.Random(1)
    every = {it.name: 1.0 for it in intents_for("sql_analyst")}
    train = {
        sample("sql_analyst", rng, slots, rephrase_rate=r, weights=w).question.lower().rstrip("?")
        for r in (0.0, 1.0)
        for w in (None, every)
        for _ in range(3000)
    }
    assert len(cases) >= 14 and not asked & shipped and not asked & train
    for c in cases:
        out, _ = box.db().query(c["sql"])  # a bad query raises ToolError
        assert len(out.splitlines()) >= 3, c["question"]  # header, a row, the limits note
    assert {c["kind"] for c in cases} >= {"top_n", "joined_filter", "three_tables", "date_range", "none_found"}


def test_date_ranges_say_the_months_their_bounds_cover():
    """``intents_broad.date_range``: the words and the month bounds agree (a quarter is its three
    months, a half its six, "from April to June" April to June, "during April" April, a year all twelve) and stay where the
    data is (orders 2025-01..2026-10; a year may be 2024, where the answer is none)."""
    from specterm.models.training.intent_base import MONTHS
    from specterm.models.training.intents_broad import date_range

    rng = random.Random(3)
    seen = set()
    for _ in range(400):
        r = date_range(rng)
        w, (y1, m1), (y2, m2) = r["w"], map(int, r["lo"].split("-")), map(int, r["hi"].split("-"))
        year = int(re.search(r"\d{4}", w).group())
        assert y1 == y2 == year and 1 <= m1 <= m2 <= 12, r
        assert year in (2025, 2026) or w.endswith("2024") and (m1, m2) == (1, 12), r
        assert year != 2026 or m2 <= 10 or (m1, m2) == (1, 12), r  # "in 2026": the year, as asked
        if q := re.search(r"Q(\d)|(\w+) quarter", w):
            n = int(q.group(1)) if q.group(1) else ["first", "second", "third", "fourth"].index(q.group(2)) + 1
            assert (m1, m2) == (3 * n - 2, 3 * n), r
            seen.add("quarter")
        elif h := re.search(r"H(\d)|(\w+) half", w):
            n = int(h.group(1)) if h.group(1) else ["first", "second"].index(h.group(2)) + 1
            assert (m1, m2) == (6 * n - 5, 6 * n), r
            seen.add("half")
        elif "from" not in w and (name := re.search("|".join(MONTHS), w)):
            assert m1 == m2 == MONTHS.index(name.group()) + 1, r
            seen.add("month")
        elif "from" in w:
            names = re.findall("|".join(MONTHS), w)
            assert [MONTHS.index(n) + 1 for n in names] == [m1, m2], r
            seen.add("span")
        else:
            assert (m1, m2) == (1, 12), r
            seen.add("year")
    assert seen == {"quarter", "half", "span", "month", "year"}


def test_the_broad_kinds_leave_the_default_corpus_as_it_was():
    """The broad intents weigh 0: ``sample`` with default weights never draws one, so the default
    corpus (the embedded pair's recipe) and the held-out evaluation are unchanged."""
    from specterm.agent.tools import ToolBox
    from specterm.models.training.intents import Slots, sample
    from specterm.models.training.intents_broad import BROAD_SQL_INTENTS

    a = load_agent("sql_analyst")
    slots, rng = Slots(ToolBox(a).db()), random.Random(0)
    broad = {it.name for it in BROAD_SQL_INTENTS}
    assert all(it.weight == 0 for it in BROAD_SQL_INTENTS)
    assert not {sample("sql_analyst", rng, slots).intent for _ in range(3000)} & broad
    assert not {sample("sql_analyst", rng, slots, heldout=True).intent for _ in range(300)} & broad
