#!/usr/bin/env python
"""Task success of the shipped agents on their evaluation cases (``agents/<name>/eval.toml``).

For each case the agent runs one request on the real engine (default: the tiny test pair,
speculative, greedy). Scores, per case:

* right tool — the expected tool was called at least once;
* right arguments — execution match: for ``query_sql``, one of the agent's queries returned the same
  rows as the gold SQL; for a calculator, one call returned the same result as the expected
  arguments; for ``search_docs``, one search's top passage came from the expected document;
* correct answer — the final answer contains the gold value (SQL: the gold result's first value,
  numbers compared within 0.005; otherwise one of the listed strings, case-insensitive);
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


def score(agent, box, case: dict, result, events) -> dict:
    from specterm.events import ToolResult

    results = [e for e in events if isinstance(e, ToolResult)]
    pairs = list(zip(result.calls, results))
    answer = (result.answer or "").lower()
    if "sql" in case:
        tool = "query_sql"
        gold_text, _ = box.db().query(case["sql"])
        gold = _rows(gold_text)
        args_ok = any(c.tool == tool and r.ok and _rows(r.content) == gold for c, r in pairs)
        first = gold[0].split("\t")[0] if gold else ""
        try:
            value = float(first)
            answer_ok = any(abs(x - value) < 0.005 for x in _numbers(answer))
        except ValueError:
            answer_ok = bool(first) and _says(answer, first)
    else:
        tool = case["tool"]
        if "doc" in case:
            args_ok = any(c.tool == tool and r.ok and r.content.startswith(f"[1] {case['doc']} ")
                          for c, r in pairs)
        else:
            expected = box.call(tool, case["arguments"]).content
            args_ok = any(c.tool == tool and r.ok and r.content == expected for c, r in pairs)
        answer_ok = any(_says(answer, a) for a in case["answer"])
    tool_ok = any(c.tool == tool for c in result.calls)
    return {"question": case["question"], "tool": tool_ok, "arguments": args_ok, "answer": answer_ok,
            "success": tool_ok and args_ok and answer_ok, "calls": [c.raw for c in result.calls],
            "final": result.answer, "error": result.error}


class SpecTally:
    """Speculation numbers per generation kind (tool_call / answer), from the event stream."""

    def __init__(self) -> None:
        from specterm.stats import SpecStats

        self.stats = {"tool_call": SpecStats(), "answer": SpecStats()}
        self.forced = {"tool_call": 0, "answer": 0}
        self._kind = "tool_call"

    def __call__(self, event) -> None:
        from specterm.events import AgentStepStarted, SpecStep

        if isinstance(event, AgentStepStarted) and event.kind in self.stats:
            self._kind = event.kind
        elif isinstance(event, SpecStep):
            self.stats[self._kind].add_step(event)
            self.forced[self._kind] += sum(t.forced for t in event.tokens)

    def summary(self) -> dict:
        out = {}
        for kind, s in self.stats.items():
            rate, mal = s.acceptance_rate, s.mean_acceptance_length
            out[kind] = {"tokens": s.tokens, "acceptance_rate": None if rate is None else round(rate, 3),
                         "mean_acceptance_length": None if mal is None else round(mal, 2),
                         "forced_share": round(self.forced[kind] / s.tokens, 3) if s.tokens else None}
        return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--agent", action="append", help="agent name (repeatable; default: every agent with eval.toml)")
    ap.add_argument("--limit", type=int, help="first N cases per agent")
    ap.add_argument("--target", help="target model dir (default: the tiny test pair)")
    ap.add_argument("--draft", help="draft model dir")
    ap.add_argument("--no-spec", action="store_true", help="target-only")
    ap.add_argument("-k", type=int, default=4, help="draft tokens per step (default 4)")
    ap.add_argument("--json", metavar="FILE", help="also write every case's details here")
    args = ap.parse_args(argv)

    from specterm.agent import AgentRunner, list_agents, load_agent
    from specterm.agent.tools import ToolBox
    from specterm.engine import EngineConfig, load_engine

    if args.target:
        target, draft = args.target, args.draft or args.target
    else:
        from specterm.models.defaults import ensure_default_models

        target, draft = (str(p) for p in ensure_default_models())
    names = args.agent or [n for n in list_agents() if load_cases(load_agent(n))]
    config = EngineConfig(target=target, draft=draft, method=None if args.no_spec else "draft_model",
                          num_speculative_tokens=args.k)
    report = {"models": config.models_summary(), "agents": {}}
    with load_engine(config) as engine:
        for name in names:
            agent = load_agent(name)
            box, tally, rows = ToolBox(agent), SpecTally(), []
            runner = AgentRunner(agent, engine, toolbox=box)
            cases = load_cases(agent)[: args.limit]
            started = time.perf_counter()
            for i, case in enumerate(cases, 1):
                events: list = []

                def sink(event, events=events):
                    events.append(event)
                    tally(event)

                result = runner.run(case["question"], sink)
                rows.append(score(agent, box, case, result, events))
                r = rows[-1]
                print(f"  {name} {i:2d}/{len(cases)} tool={'Y' if r['tool'] else '-'} "
                      f"args={'Y' if r['arguments'] else '-'} answer={'Y' if r['answer'] else '-'}  "
                      f"{case['question'][:60]}", file=sys.stderr, flush=True)
            n = len(rows) or 1
            report["agents"][name] = {
                "cases": len(rows),
                **{k: round(sum(r[k] for r in rows) / n, 3) for k in ("tool", "arguments", "answer", "success")},
                "speculation": tally.summary(), "wall_s": round(time.perf_counter() - started, 1),
                "details": rows,
            }
    m = report["models"]
    print(f"models: target {m['target']}  draft {m['draft']}  method {m['method']}  k {m['num_speculative_tokens']}")
    print(f"{'agent':<15}{'cases':>6}{'tool':>7}{'args':>7}{'answer':>8}{'success':>9}   speculation (tool-call gens | answer gens)")
    for name, a in report["agents"].items():
        sp = a["speculation"]
        fmt = lambda s: (f"acc {s['acceptance_rate']} len {s['mean_acceptance_length']} "  # noqa: E731
                         f"forced {s['forced_share']} ({s['tokens']} tok)")
        print(f"{name:<15}{a['cases']:>6}{a['tool']:>7.0%}{a['arguments']:>7.0%}{a['answer']:>8.0%}"
              f"{a['success']:>9.0%}   {fmt(sp['tool_call'])} | {fmt(sp['answer'])}")
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
