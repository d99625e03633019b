#!/usr/bin/env python
"""Task success of the shipped agents on their evaluation cases (``agents/<name>/eval.toml``).

For each case the agent runs one request on the real engine (default: the tiny test pair,
speculative, greedy). Scores, per case:

* right tool — the expected tool was called at least once;
* right arguments — execution match: for ``query_sql``, one of the agent's queries returned the same
  rows as the gold SQL; for a calculator, one call returned the same result as the expected
  arguments; for ``search_docs``, one search's top passage came from the expected document;
* correct answer — the final answer contains the gold value (SQL: the first value of a gold row,
  numbers compared within 0.005, of every row where the case says ``every_row = true``; otherwise
  one of the listed strings, case-insensitive);
* success — all three.

It also reports what speculation did on the agent's generations: acceptance rate (accepted ÷
drafted), mean acceptance length, and the share of grammar-forced tokens, split into tool-call
generations and answer generations.

    .venv/bin/python scripts/agent_eval.py                 # both agents, every case
    .venv/bin/python scripts/agent_eval.py --limit 3 --agent ops_assistant
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
import tomllib
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def load_cases(agent) -> list[dict]:
    path = agent.path / "eval.toml"
    return tomllib.loads(path.read_text(encoding="utf-8"))["case"] if path.is_file() else []


def _rows(text: str) -> list[str]:
    """The data lines of a query_sql result (header and limits note dropped), order-insensitive."""
    return sorted(text.splitlines()[1:-1])


def _numbers(text: str) -> list[float]:
    return [float(x) for x in re.findall(r"-?\d+(?:\.\d+)?", text.replace(",", ""))]


def _says(answer: str, phrase: str) -> bool:
    """``phrase`` occurs in ``answer`` as whole words (so "no" does not match "now")."""
    return re.search(r"(?<!\w)" + re.escape(phrase.lower()) + r"(?!\w)", answer) is not None


def _answer_names(answer: str, value: str) -> bool:
    try:
        number = float(value)
    except ValueError:
        return bool(value) and _says(answer, value)
    return any(abs(x - number) < 0.005 for x in _numbers(answer))


def score(agent, box, case: dict, result, events) -> dict:
    from specterm.events import ToolResult

    results = [e for e in events if isinstance(e, ToolResult)]
    pairs = list(zip(result.calls, results))
    answer = (result.answer or "").lower()
    if case.get("tool") == "none":  # answered without a tool: a greeting, a refusal, "not in the data"
        tool, args_ok = "none", not result.calls
        answer_ok = any(_says(answer, a) for a in case["answer"])
    elif "sql" in case:
        tool = "query_sql"
        gold_text, _ = box.db().query(case["sql"])
        gold = _rows(gold_text)
        args_ok = any(c.tool == tool and r.ok and _rows(r.content) == gold for c, r in pairs)
        # The answer names the first column of a gold row; any row, since a question may match several
        # (the shop has three customers called Frank Silva: each one's email is a right answer).
        named = (_answer_names(answer, row.split("\t")[0]) for row in gold)
        # "which three ...": the answer names every row (every_row), not one of them
        answer_ok = all(named) if case.get("every_row") else any(named)
        if gold in ([], ["0"]):  # nothing found: saying so is the answer
            answer_ok = answer_ok or any(_says(answer, w) for w in ("no", "none", "zero", "never"))
    else:
        tool = case["tool"]
        if "doc" in case:
            args_ok = any(c.tool == tool and r.ok and r.content.startswith(f"[1] {case['doc']} ") for c, r in pairs)
        else:
            expected = box.call(tool, case["arguments"]).content
            args_ok = any(c.tool == tool and r.ok and r.content == expected for c, r in pairs)
        answer_ok = any(_says(answer, a) for a in case["answer"])
    tool_ok = not result.calls if tool == "none" else any(c.tool == tool for c in result.calls)
    # An answer that states a figure or date no tool returned fails, even if it also names the gold
    # value (agent/grounding.py; the loop records it on the answer step).
    from specterm.events import AgentStepFinished

    last = next((e for e in reversed(events) if isinstance(e, AgentStepFinished) and e.answer is not None), None)
    withheld = last is not None and getattr(last, "withheld", None) is not None
    flagged = (last.ungrounded or []) if last is not None and not withheld else []
    answer_ok = answer_ok and not withheld  # "could not answer: … no such column" is no answer
    return {
        "question": case["question"],
        "tool": tool_ok,
        "arguments": args_ok,
        "answer": answer_ok,
        "grounded": not flagged,
        "ungrounded": flagged,
        "withheld": withheld,
        "success": tool_ok and args_ok and answer_ok and not flagged,
        "calls": [c.raw for c in result.calls],
        "final": result.answer,
        "error": result.error,
    }


def _by_intent(rows: list[dict], cases: list[dict]) -> dict:
    """Success per intent (held-out phrasings) or kind (``--cases`` files), in order of appearance."""
    groups: dict[str, list[bool]] = {}
    for r, c in zip(rows, cases):
        groups.setdefault(c.get("intent") or c.get("kind") or "case", []).append(r["success"])
    return {k: round(sum(v) / len(v), 3) for k, v in groups.items()}


class SpecTally:
    """Speculation numbers per generation kind (tool_call / answer), from the event stream."""

    def __init__(self) -> None:
        from specterm.stats import SpecStats

        self.stats = {"tool_call": SpecStats(), "answer": SpecStats()}
        self.forced = {"tool_call": 0, "answer": 0}
        self.corrections = {"entity": 0, "syntax": 0}
        self.tokens = {"entity": 0, "syntax": 0}
        self._kind = "tool_call"
        self._gen: list[tuple[str, str]] = []  # (text, verdict) of the generation in progress

    def __call__(self, event) -> None:
        from specterm.events import AgentStepFinished, AgentStepStarted, SpecStep

        if isinstance(event, AgentStepStarted) and event.kind in self.stats:
            self._kind = event.kind
            self._gen = []
        elif isinstance(event, SpecStep):
            self.stats[self._kind].add_step(event)
            self.forced[self._kind] += sum(t.forced for t in event.tokens)
            self._gen += [(t.text, t.verdict) for t in event.tokens]
        elif isinstance(event, AgentStepFinished) and event.kind in self.stats and self._gen:
            text = "".join(t for t, _ in self._gen)
            mask = entity_mask(text)
            pos = 0
            for piece, verdict in self._gen:
                kind = "entity" if any(mask[pos : pos + len(piece)]) else "syntax"
                pos += len(piece)
                self.tokens[kind] += 1
                self.corrections[kind] += verdict == "correction"
            self._gen = []

    def summary(self) -> dict:
        n = sum(self.corrections.values())
        out: dict = {
            "corrections": {
                **self.corrections,
                "entity_share": round(self.corrections["entity"] / n, 3) if n else None,
                "entity_token_share": round(self.tokens["entity"] / (sum(self.tokens.values()) or 1), 3),
            }
        }
        for kind, s in self.stats.items():
            rate, mal = s.acceptance_rate, s.mean_acceptance_length
            out[kind] = {
                "tokens": s.tokens,
                "acceptance_rate": None if rate is None else round(rate, 3),
                "mean_acceptance_length": None if mal is None else round(mal, 2),
                "forced_share": round(self.forced[kind] / s.tokens, 3) if s.tokens else None,
            }
        return out


_ENTITY = re.compile(r"'[^']*'|-?\d+(?:\.\d+)?|(?<=\"(?:table|query)\":\")[^\"]*")


def entity_mask(text: str) -> list[bool]:
    """Which characters of a generated call are *entities* (SQL string literals, numbers, the
    values of ``table``/``query`` arguments) rather than syntax (JSON, SQL keywords, prose)."""
    mask = [False] * len(text)
    for m in _ENTITY.finditer(text):
        mask[m.start() : m.end()] = [True] * (m.end() - m.start())
    return mask


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--agent", action="append", help="agent name (repeatable; default: every agent with eval.toml)")
    ap.add_argument("--limit", type=int, help="first N cases per agent")
    ap.add_argument("--target", help="target model dir (default: the embedded pair, models/embedded)")
    ap.add_argument("--draft", help="draft model dir")
    ap.add_argument("--preset", choices=("smollm2-agent",), help="the SmolLM2 agent pair (built on first use)")
    ap.add_argument("--no-spec", action="store_true", help="target-only")
    ap.add_argument("-k", type=int, default=4, help="draft tokens per step (default 4)")
    ap.add_argument("--json", metavar="FILE", help="also write every case's details here")
    ap.add_argument(
        "--cases",
        metavar="FILE",
        help="evaluate the [[case]]s of this TOML file (e.g. "
        "agents/sql_analyst/eval_natural.toml, by kind) instead of the agent's eval.toml",
    )
    ap.add_argument(
        "--heldout",
        type=int,
        metavar="N",
        help="N cases per agent in the held-out phrasings "
        "(specterm.models.training.intents: never in the training corpus) instead of eval.toml",
    )
    ap.add_argument(
        "--example-k",
        type=int,
        metavar="K",
        help="worked examples retrieved per request "
        "(default: the agent's own example_k; 2 for a pair trained with them)",
    )
    ap.add_argument("--no-examples", action="store_true", help="retrieve no worked examples (= --example-k 0)")
    args = ap.parse_args(argv)

    from specterm.agent import AgentRunner, list_agents, load_agent
    from specterm.agent.tools import ToolBox
    from specterm.engine import EngineConfig, load_engine

    if args.preset:
        from specterm.models.smollm2_agent import ensure_smollm2_agent

        target, draft = (str(p) for p in ensure_smollm2_agent(log=print))
    elif args.target:
        target, draft = args.target, args.draft or args.target
    else:
        from specterm.models.defaults import ensure_default_models

        target, draft = (str(p) for p in ensure_default_models())
    names = args.agent or [n for n in list_agents() if load_cases(load_agent(n))]
    config = EngineConfig(
        target=target, draft=draft, method=None if args.no_spec else "draft_model", num_speculative_tokens=args.k
    )
    report = {"models": config.models_summary(), "agents": {}}
    with load_engine(config) as engine:
        for name in names:
            agent = load_agent(name)
            k = 0 if args.no_examples else args.example_k
            if k is not None:
                agent = agent.model_copy(update={"retrieval": agent.retrieval.model_copy(update={"example_k": k})})
            box, tally, rows = ToolBox(agent), SpecTally(), []
            runner = AgentRunner(agent, engine, toolbox=box)
            if args.heldout:
                from specterm.models.training.corpus import heldout_cases

                cases = heldout_cases(name, args.heldout)[: args.limit]
            elif args.cases:
                cases = tomllib.loads(Path(args.cases).read_text(encoding="utf-8"))["case"][: args.limit]
            else:
                cases = load_cases(agent)[: args.limit]
            started = time.perf_counter()
            for i, case in enumerate(cases, 1):
                events: list = []

                def sink(event, events=events, tally=tally):
                    events.append(event)
                    tally(event)

                result = runner.run(case["question"], sink)
                rows.append(score(agent, box, case, result, events))
                r = rows[-1]
                print(
                    f"  {name} {i:2d}/{len(cases)} tool={'Y' if r['tool'] else '-'} "
                    f"args={'Y' if r['arguments'] else '-'} answer={'Y' if r['answer'] else '-'} "
                    f"grounded={'Y' if r['grounded'] else '-'}  "
                    f"{case['question'][:60]}",
                    file=sys.stderr,
                    flush=True,
                )
            n = len(rows) or 1
            report["agents"][name] = {
                "cases": len(rows),
                **{
                    k: round(sum(r[k] for r in rows) / n, 3)
                    for k in ("tool", "arguments", "answer", "grounded", "success")
                },
                "ungrounded_answers": sum(not r["grounded"] for r in rows),
                "withheld_answers": sum(r["withheld"] for r in rows),
                "speculation": tally.summary(),
                "wall_s": round(time.perf_counter() - started, 1),
                "by_intent": _by_intent(rows, cases),
                "details": rows,
            }
    report["example_k"] = 0 if args.no_examples else args.example_k
    report["cases"] = f"heldout {args.heldout}" if args.heldout else args.cases or "eval.toml"
    m = report["models"]
    print(f"models: target {m['target']}  draft {m['draft']}  method {m['method']}  k {m['num_speculative_tokens']}")
    print(
        f"{'agent':<15}{'cases':>6}{'tool':>7}{'args':>7}{'answer':>8}{'grounded':>9}{'success':>9}   "
        "speculation (tool-call gens | answer gens)"
    )
    for name, a in report["agents"].items():
        sp = a["speculation"]

        def fmt(s):
            return (
                f"acc {s['acceptance_rate']} len {s['mean_acceptance_length']} "
                f"forced {s['forced_share']} ({s['tokens']} tok)"
            )

        print(
            f"{name:<15}{a['cases']:>6}{a['tool']:>7.0%}{a['arguments']:>7.0%}{a['answer']:>8.0%}"
            f"{a['grounded']:>9.0%}{a['success']:>9.0%}   {fmt(sp['tool_call'])} | {fmt(sp['answer'])}"
        )
        c = sp["corrections"]
        print(
            f"{'':<15}corrections: {c['entity']} on entity tokens, {c['syntax']} on syntax "
            f"(entity share {c['entity_share']}; entities are {c['entity_token_share']:.0%} of tokens)"
        )
        print(
            f"{'':<15}answers with an ungrounded figure: {a['ungrounded_answers']}; withheld (the "
            f"model's invented figure replaced by what failed): {a['withheld_answers']}"
        )
        if args.cases:
            print(f"{'':<15}by kind: " + ", ".join(f"{k} {v:.0%}" for k, v in a["by_intent"].items()))
        weak = {k: v for k, v in a["by_intent"].items() if v < 1}
        if weak and not args.cases:
            print(f"{'':<15}intents below 100%: " + ", ".join(f"{k} {v:.0%}" for k, v in sorted(weak.items())))
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
