"""Agent transcripts for training the embedded pair, made by running the real tools.

Questions come from the *training* phrasings of ``intents`` (many per intent, entities filled from
the agents' real data, some with typos); a scripted "oracle" walks the real loop for each: worked
examples and document passages retrieved by the agent's own embedding index, then
``{"tool":...,"arguments":{...}}`` calls in compact JSON (as structured output emits it with
``disable_any_whitespace``), the real tool results (``ToolBox.call`` → ``for_prompt``), and a final
``{"answer":...}`` built from the last result. Multi-step where the question needs it (look at the
tables first; a second query that uses the first one's result; a policy lookup before a calculator),
and no tool at all for greetings and what the data cannot answer.

Retrieved worked examples never include the transcript's own question, and for a third of the
transcripts not its own calls either, so the model learns both to *copy* the nearest example's call
(at inference the nearest example is often the same intent and entity asked another way; the pool is
large enough for that) and to *adapt* one (swap the entity: a customer, a number the pool cannot
hold). Training questions are reworded (``intents.rephrase``) and misspelt (``add_typo``) at random,
so a memorised sentence is a worse guide than the example and the entity.

With ``recover_rate``, that share of the one- and two-call SQL transcripts starts with a *slip*: the
answering query with one mistake a model makes about SQLite or this schema (``SQL_SLIPS``: ``mean()``
for ``avg()``, ``cost`` for ``price``, ``customer`` for ``customers``), the real error the tool
returns, then the right query. The slip is in the text but not trained (only the recovery is), so
the model learns to read an error and fix the call instead of answering with an invented number.

Each transcript is the text of ``render_prompt`` after the final answer (without the trailing
``<|call|>`` line) plus the character spans of the calls, which are the only trained positions; with
``render``, the same conversation in a pretrained model's own chat template
(``scripts/finetune_pretrained.py``).
Deterministic for a seed.
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from specterm.agent.examples import EXAMPLE_DOC, ExampleCall, WorkedExample, example_text
from specterm.agent.loader import load_agent
from specterm.agent.prompt import build_chat, call_key_for, render_prompt
from specterm.agent.tools import ToolBox
from specterm.events import Passage
from specterm.models.training.intents import Case, Slots, add_typo, intents_for, sample

if TYPE_CHECKING:
    from specterm.engine.chat import PromptRenderer


@dataclass
class Transcript:
    agent: str
    text: str
    calls: list[tuple[int, int]]  # character spans of the generated calls
    intent: str = ""


def compact(obj) -> str:
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False)


def _values(result: str) -> list[str]:
    """The first column of a query_sql result (header and limits note dropped)."""
    lines = result.split("\n")
    return [r.split("\t")[0] for r in lines[1:-1]] if len(lines) > 2 else []


def _pick_sentence(question: str, passage: str, answer_words: tuple[str, ...] | list[str] = ()) -> str:
    """The sentence of a search_docs result the oracle answers with: with ``answer_words`` (the
    docs intent's words the answer must contain), the first sentence that holds them all; else, or
    when none does, the one sharing most words with the question. Word overlap alone picks a
    sentence that does not answer for half the training questions ("Can we deploy on a Friday?" →
    the canary sentence: "deploy" matches, "deploys"/"fridays" do not)."""
    from specterm.models.training.intents import STOP

    words = {w for w in re.findall(r"\w+", question.lower()) if w not in STOP}
    sents = [s.strip() for s in re.split(r"(?<=[.!?])\s+", passage.split(": ", 1)[-1]) if s.strip()]
    having = [s for s in sents if answer_words and all(w in s.lower() for w in answer_words)]
    best = (
        having[0]
        if having
        else max(sents, key=lambda s: len(words & set(re.findall(r"\w+", s.lower()))), default=passage)
    )
    return best.replace(" …(cut)", "").replace("…", "")[:150]


# Mistakes a model makes about SQLite and this schema: (pattern, what it writes instead). A slip is
# applied outside string literals only, so entities stay exact.
SQL_SLIPS = [
    (r"\bavg\(", ("mean(", "average(")),
    (r"\bcount\(\*\)", ("count(all)",)),
    (r"\bprice\b", ("cost", "unit_price")),
    (r"\bamount\b", ("value", "amount_paid")),
    (r"\bcountry\b", ("nation", "country_code")),
    (r"\bcategory\b", ("category_name", "type")),
    (r"\bemail\b", ("email_address", "mail")),
    (r"\bquantity\b", ("qty",)),
    (r"\bmethod\b", ("payment_method",)),
    (r"\btotal\b", ("order_total", "total_amount")),
    (r"\bFROM customers\b", ("FROM customer", "FROM clients")),
    (r"\bFROM products\b", ("FROM product", "FROM items")),
    (r"\bFROM payments\b", ("FROM payment",)),
    (r"\bFROM orders\b", ("FROM purchases",)),
]


def slip(rng: random.Random, sql: str) -> str | None:
    """``sql`` with one of the ``SQL_SLIPS`` that applies to it (outside its string literals), or None."""
    parts = re.split(r"('(?:[^']|'')*')", sql)  # odd indices are string literals
    options = [(pat, alt) for pat, alts in SQL_SLIPS if any(re.search(pat, c) for c in parts[0::2]) for alt in alts]
    if not options:
        return None
    pat, alt = rng.choice(options)
    k = next(k for k in range(0, len(parts), 2) if re.search(pat, parts[k]))
    parts[k] = re.sub(pat, alt, parts[k], count=1)
    return "".join(parts)


def with_slip(box: ToolBox, rng: random.Random, steps: list[tuple[str, dict, str]]):
    """``steps`` with a failed slip of the last query before it, and the index of that untrained
    step; unchanged (and None) when no slip applies or the slipped query happens to run."""
    i = max((j for j, (tool, _, _) in enumerate(steps) if tool == "query_sql"), default=None)
    bad = slip(rng, steps[i][1]["sql"]) if i is not None else None
    if bad is None:
        return steps, None
    out = box.call("query_sql", {"sql": bad})
    if out.ok:
        return steps, None
    return steps[:i] + [("query_sql", {"sql": bad}, out.for_prompt(box.agent.result_chars))] + steps[i:], i


class _Fields(dict):
    def __missing__(self, key: str) -> str:
        return ""


def _shape(text: str) -> tuple:
    """The calls of an ``example_text`` as (tool, argument names) pairs."""
    calls = [c.split(" ", 1) for c in text.split(" → ")[1:] if not c.startswith("answer: ")]
    return tuple((c[0], tuple(sorted(json.loads(c[1]) if len(c) > 1 else {}))) for c in calls)


def contrasts(shape: tuple, other: tuple) -> bool:
    """Whether calls of ``other`` shape are a contrast for ``shape``: the same tools in the same
    order, other argument names. By the *set* of tools, every one-query SQL question's contrasts were
    the two-query examples (unrelated plans): the retrain with that, the slips and the docs answer
    words fell from 86 to 48 % sql_analyst success on 100 held-out cases (ops 64 -> 88 %)."""
    return [t for t, _ in other] == [t for t, _ in shape] and other != shape


def resolve(box: ToolBox, case: Case, *, answer_words: bool = False) -> tuple[list[tuple[str, dict, str]], str]:
    """Run a case's calls on the real tools: ([(tool, arguments, result)], final answer); a docs
    answer quotes the sentence holding the case's answer words with ``answer_words`` (``_pick_sentence``)."""
    steps: list[tuple[str, dict, str]] = []
    fields = _Fields(case.slots)
    for tool, args in case.calls:
        if steps:
            args = {k: v.replace("{r1}", fields["r1"]) if isinstance(v, str) else v for k, v in args.items()}
        res = box.call(tool, args).for_prompt(box.agent.result_chars)
        steps.append((tool, args, res))
        if tool == "query_sql" and "r1" not in fields:
            fields["r1"] = (_values(res) or [""])[0]
    last = steps[-1][2] if steps else ""
    vals = _values(last)
    fields.update(v=vals[0] if vals else "", all=", ".join(vals))
    for key, pattern in (
        ("budget", r": ([\d.]+) minutes"),
        ("left", r"remaining ([\d.-]+) minutes"),
        ("replicas", r"needed: (\d+)"),
    ):
        m = re.search(pattern, last)
        fields[key] = m.group(1) if m else ""
    if steps and steps[-1][0] == "search_docs":
        fields["sentence"] = _pick_sentence(case.question, last, case.slots.get("words", ()) if answer_words else ())
    return steps, case.answer.format_map(fields)


def worked_examples(agent_name: str, n: int, seed: int, weights: dict[str, float] | None = None) -> list[WorkedExample]:
    """A pool of worked examples from the training phrasings (distinct questions, real calls);
    ``weights`` as ``intents.sample``'s (by name over ``Intent.weight``)."""
    agent = load_agent(agent_name)
    box = ToolBox(agent)
    rng = random.Random(seed)
    slots = Slots(box.db() if agent.database else None)
    out: dict[str, WorkedExample] = {}
    for _ in range(n * 20):
        if len(out) >= n:
            break
        case = sample(agent_name, rng, slots, weights=weights)
        if case.question in out:
            continue
        steps, answer = resolve(box, case)
        out[case.question] = WorkedExample(
            question=case.question,
            calls=[ExampleCall(tool=t, arguments=a) for t, a, _ in steps],
            answer=None if steps else answer,
        )
    return list(out.values())


def write_examples(path: Path, examples: list[WorkedExample], header: str) -> None:
    """``examples.toml`` (TOML basic strings are JSON strings, so json.dumps quotes them)."""

    def value(v) -> str:
        if isinstance(v, dict):
            return "{ " + ", ".join(f"{k} = {value(x)}" for k, x in v.items()) + " }"
        return json.dumps(v, ensure_ascii=False)

    lines = [f"# {line}" for line in header.splitlines()]
    for ex in examples:
        lines += ["", "[[example]]", f"question = {value(ex.question)}"]
        if ex.calls:
            lines.append(
                "calls = [" + ", ".join(value({"tool": c.tool, "arguments": c.arguments}) for c in ex.calls) + "]"
            )
        else:
            lines.append(f"answer = {value(ex.answer)}")
    Path(path).write_text("\n".join(lines) + "\n", encoding="utf-8")


def generate(
    seed: int = 0,
    n_sql: int = 2400,
    n_ops: int = 1600,
    *,
    typo_rate: float = 0.25,
    rephrase_rate: float = 0.4,
    substitute_rate: float = 0.35,
    example_k: int = 2,
    heldout: bool = False,
    render: Render | None = None,
    answer_words: bool = False,
    recover_rate: float = 0.0,
    contrast_rate: float = 0.0,
    lower_rate: float = 0.0,
    weights: dict[str, float] | None = None,
) -> list[Transcript]:
    """The training transcripts (deterministic for ``seed``), each with its ``example_k`` nearest
    worked examples (the agent's ``examples.toml``) in the context; with ``heldout``, transcripts of
    the held-out phrasings instead (no typos added, retrieval exactly as at inference), for evaluation.
    ``render`` writes them in a model's own chat format instead of the agent format (``Render``).
    ``answer_words``: docs answers quote the sentence that answers (``_pick_sentence``); off by
    default because the shipped embedded pair was trained without it, and ``specterm models train``
    reproduces that pair. ``recover_rate``: the share of one- and two-call SQL transcripts that
    start with a failed slip of their query (``with_slip``; more calls would pass ``max_steps``).
    ``contrast_rate``: the share of transcripts whose retrieved examples call the same tools with
    other arguments where the pool has such (an SLO budget without the minutes used, when the question
    gives them), so the model reads the question for the arguments instead of copying the example's.
    ``lower_rate``: the share of questions typed all in lower case, entities too ("customers in
    germany"), which ``add_typo`` never does (it keeps entity words so the calls stay right): the
    calls keep the data's spelling. ``weights``: intent weights by name over ``Intent.weight`` (a
    weight-0 intent such as ``orders_for_min_product`` is only in a corpus that names it).
    All four options are off by default and draw nothing from the random stream when off, so the
    default corpus (and the pair ``specterm models train`` makes) is unchanged by them."""
    if heldout:
        typo_rate = rephrase_rate = substitute_rate = recover_rate = contrast_rate = lower_rate = 0.0
        weights = None
    known = {i.name for agent in ("sql_analyst", "ops_assistant") for i in intents_for(agent)}
    if unknown := sorted(set(weights or {}) - known):
        raise ValueError(f"no such intent: {', '.join(unknown)} (known: {', '.join(sorted(known))})")
    from specterm.agent.vectors import embedder

    rng = random.Random(seed)
    out: list[Transcript] = []
    for agent_name, n in (("sql_analyst", n_sql), ("ops_assistant", n_ops)):
        agent = load_agent(agent_name)
        box = ToolBox(agent)
        slots = Slots(box.db() if agent.database else None)
        cases = []
        for _ in range(n):
            case = sample(agent_name, rng, slots, heldout=heldout, rephrase_rate=rephrase_rate, weights=weights)
            if rng.random() < typo_rate and case.intent != "docs":
                case.question = add_typo(rng, case.question)
            if lower_rate and rng.random() < lower_rate:
                case.question = case.question.lower()
            cases.append(case)
        vectors = embedder().embed([c.question for c in cases])
        store, examples = box.store(), box.examples()
        ex_texts = [text for _, text in examples.passages] if examples is not None else []
        ex_questions = [t.split(" → ", 1)[0] for t in ex_texts]
        ex_shapes = [_shape(t) for t in ex_texts]
        for case, vec in zip(cases, vectors):
            steps, answer = resolve(box, case, answer_words=answer_words)
            passages: list[Passage] = []
            if examples is not None and example_k:
                own = example_text(
                    WorkedExample(
                        question=case.question,
                        calls=[ExampleCall(tool=t, arguments=a) for t, a, _ in steps],
                        answer=None if steps else answer,
                    )
                ).split(" → ", 1)[1]
                substitute = rng.random() < substitute_rate
                shape = tuple((t, tuple(sorted(a))) for t, a, _ in steps)
                other = lambda i: contrasts(shape, ex_shapes[i])  # noqa: E731, B023 - called in this iteration only
                contrast = bool(
                    contrast_rate
                    and steps
                    and rng.random() < contrast_rate
                    and any(other(i) for i in range(len(ex_texts)))
                )
                scores = examples.matrix @ vec
                for i in np.argsort(-scores, kind="stable"):
                    if (
                        ex_questions[i] == case.question
                        or (substitute and ex_texts[i].endswith(" → " + own))
                        or (contrast and not other(i))
                    ):
                        continue
                    passages.append(Passage(doc=EXAMPLE_DOC, score=round(float(scores[i]), 4), text=ex_texts[i]))
                    if len(passages) == example_k:
                        break
            if agent.retrieval.top_k:
                scores = store.matrix @ vec
                for i in np.argsort(-scores, kind="stable")[: agent.retrieval.top_k]:
                    doc, text = store.passages[i]
                    passages.append(Passage(doc=doc, score=round(float(scores[i]), 4), text=text))
            slipped = None
            if recover_rate and agent.database and 0 < len(steps) <= 2 and rng.random() < recover_rate:
                steps, slipped = with_slip(box, rng, steps)
            out.append(_transcript(agent, case, steps, answer, passages, render, slipped))
    return out


def add_training_args(ap) -> None:
    """``generate``'s training options as a training script's flags (``scripts/finetune_pretrained.py``
    and ``scripts/train_chat_draft.py`` train the pair on one corpus, so they take the same ones);
    ``training_options`` reads them back."""
    ap.add_argument(
        "--docs-answer-words",
        action="store_true",
        help="docs answers quote the sentence that answers (corpus.generate(answer_words=True))",
    )
    ap.add_argument(
        "--recover-rate",
        type=float,
        default=0.0,
        help="share of 1-2 call SQL transcripts that first fail on a slipped query and fix it",
    )
    ap.add_argument(
        "--contrast-rate",
        type=float,
        default=0.0,
        help="share of transcripts retrieving examples of the same tools with other arguments",
    )
    ap.add_argument(
        "--lower-rate", type=float, default=0.0, help="share of questions typed all in lower case, entities too"
    )
    ap.add_argument(
        "--weight",
        action="append",
        default=[],
        metavar="INTENT=W",
        help="an intent's weight in the corpus (repeatable; e.g. orders_for_min_product=1)",
    )


def training_options(ap, args) -> dict[str, Any]:
    """The ``generate`` keyword arguments of the flags ``add_training_args`` added; a malformed
    ``--weight`` is the parser's one-line usage error."""
    try:
        weights = dict(parse_weight(w) for w in args.weight)
    except ValueError as e:
        ap.error(str(e))
    return {
        "answer_words": args.docs_answer_words,
        "recover_rate": args.recover_rate,
        "contrast_rate": args.contrast_rate,
        "lower_rate": args.lower_rate,
        "weights": weights,
    }


def parse_weight(text: str) -> tuple[str, float]:
    """``INTENT=WEIGHT`` (a training script's ``--weight``) as ``(intent, weight)``."""
    name, sep, value = text.partition("=")
    try:
        if not sep or not name:
            raise ValueError
        return name, float(value)
    except ValueError:
        raise ValueError(f"expected INTENT=WEIGHT, e.g. orders_for_max_product=2, got {text!r}") from None


@dataclass(frozen=True)
class Render:
    """A model's chat format for the corpus: ``text(agent, history, passages)`` is the whole
    conversation as that model reads it (``history`` as ``prompt.render_prompt`` takes it), and
    ``key`` the call key the loop uses with it (``prompt.call_key_for``). ``end`` (the template's
    end of turn, e.g. the EOS token) is trained with each call where it follows one, as the model
    must write it to stop."""

    text: Callable[[Any, list[tuple[str, str]], list[Passage]], str]
    key: str = "name"
    end: str = ""

    @classmethod
    def chat(cls, renderer: PromptRenderer, end: str | None = None) -> Render:
        """The format ``renderer`` (the model's chat template) writes, with the loop's call key for
        it and, unless given, the tokenizer's EOS as the end of turn."""
        key = call_key_for(renderer.template)
        return cls(
            text=lambda agent, history, passages: renderer.text(build_chat(agent, history, passages, key=key)),
            key=key,
            end=(renderer.tokenizer.eos_token or "") if end is None else end,
        )


def _transcript(
    agent,
    case: Case,
    steps,
    answer: str,
    passages: list[Passage],
    render: Render | None = None,
    untrained: int | None = None,
) -> Transcript:
    """The transcript's text and the spans of its calls; the call of step ``untrained`` (a slip)
    is in the text but not among the trained spans."""
    key = "tool" if render is None else render.key
    history = [("user", case.question)]
    for tool, args, res in steps:
        history += [("call", compact({key: tool, "arguments": args})), ("result", res)]
    history.append(("call", compact({"answer": answer[: agent.answer_chars]})))
    if render is not None:
        text, mark, after = render.text(agent, history, passages), "", ""
    else:
        text, mark, after = render_prompt(agent, history, passages)[: -len("<|call|>\n")], "<|call|>\n", "\n"
    spans, pos = [], 0
    for n, t in enumerate(t for role, t in history if role == "call"):
        start = text.index(mark + t + after, pos) + len(mark)
        stop = start + len(t)
        if render is not None and render.end and text.startswith(render.end, stop):
            stop += len(render.end)
        if n != untrained:
            spans.append((start, stop))
        pos = start
    return Transcript(agent.name, text, spans, case.intent)


def heldout_cases(agent_name: str, n: int, seed: int = 12345) -> list[dict]:
    """Evaluation cases (``scripts/agent_eval.py``'s ``eval.toml`` shape) asked only in the held-out
    phrasings; the gold calls and answers come from the real tools."""
    agent = load_agent(agent_name)
    box = ToolBox(agent)
    rng = random.Random(seed)
    slots = Slots(box.db() if agent.database else None)
    out, seen = [], set()
    no_tool = {"not_in_data": ["not in the data"], "off_topic": ["only"], "greeting": ["hello"], "thanks": ["welcome"]}
    names = {i.name for i in intents_for(agent_name) if i.heldout or i.name == "docs"}
    while len(out) < n:
        case = sample(agent_name, rng, slots, heldout=True)
        if case.question in seen or case.intent not in names:
            continue
        seen.add(case.question)
        steps, answer = resolve(box, case)
        row: dict = {"question": case.question, "intent": case.intent}
        if not steps:
            row.update(tool="none", answer=no_tool[case.intent])
        elif steps[-1][0] == "query_sql":
            row["sql"] = steps[-1][1]["sql"]
        elif steps[-1][0] == "search_docs":
            row.update(tool="search_docs", doc=case.slots["doc"], answer=case.slots["words"])
        else:
            tool, args, res = steps[-1]
            value = re.search(r"(?:remaining|needed:) ([\d.-]+)", res) or re.search(r": ([\d.]+) minutes", res)
            row.update(tool=tool, arguments=args, answer=[value.group(1)])
        out.append(row)
    return out
