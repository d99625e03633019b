"""Figures for the README "Performance" section: ``specterm bench`` on the tiny pair, as Markdown.

Usage::

    python benchmarks/spec_vs_target.py [--out DIR] [--repeats N] [--max-tokens N] [--k 2,4,6,8]
    python benchmarks/spec_vs_target.py --from DIR/spec_vs_target.json   # re-aggregate and re-render

Runs ``specterm bench --workload toolcalls,prose`` (draft_model and ngram, target-only interleaved),
writes ``DIR/spec_vs_target.json`` and one SVG per workload, and prints per workload a Markdown table
plus the date and the exact command. Absolute tokens/s depend on the machine and its load; the
ratios (speed-up, measured ÷ theory) are the figures to compare.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


def _f(value, spec=".2f"):
    return "–" if value is None else format(value, spec)


def _spread(s, spec=".2f", suffix="×"):
    if s is None:
        return "–"
    return (
        f"{s['median']:{spec}}{suffix} ({s['lo']:{spec}}–{s['hi']:{spec}})"
        if s["n"] > 1
        else f"{s['median']:{spec}}{suffix}"
    )


def markdown(data: dict) -> str:
    meta = data["meta"]
    lines = [
        f"Measured {meta['date']} on {meta['host']}, vLLM {meta['vllm']}, "
        f"{meta['repeats']} rounds, max_tokens {meta['max_tokens']}, temperature {meta['temperature']:g}.",
        "",
        f"```\n{meta['command']}\n```",
        "",
    ]
    for name, wl in data["workloads"].items():
        lines += [
            f"**{name}** ({len(wl['meta']['prompts'])} prompts)",
            "",
            "| configuration | decode tok/s | TTFT ms | steps/token | acceptance | mean acc. length | α | c | "
            "speed-up (min–max) | theory | measured ÷ theory |",
            "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
        ]
        for r in wl["results"]:
            tps = r["tokens_per_s"]["median"] if r["tokens_per_s"] else None
            ttft = r["ttft_s"]["median"] * 1e3 if r["ttft_s"] else None
            lines.append(
                f"| {r['label']} | {_f(tps, '.0f')} | {_f(ttft, '.0f')} | {_f(r['steps_per_token'])} | "
                f"{_f(r['acceptance_rate'], '.0%')} | {_f(r['mean_acceptance_length'])} | {_f(r['alpha'])} | "
                f"{_f(r['c'])} | {_spread(r['speedup'])} | {_f(r['theory'])} | {_f(r['measured_over_theory'])} |"
            )
        lines.append("")
    return "\n".join(lines)


def reaggregate(data: dict) -> dict:
    """Recompute every workload's results from the stored per-request records (current definitions)."""
    from specterm.bench.results import aggregate
    from specterm.bench.runner import ConfigSpec, RequestRecord
    from specterm.stats import SpecStats

    for name, wl in data["workloads"].items():
        records = []
        for r in (x for x in data["records"] if x["workload"] == name):
            st = r["stats"]
            stats = SpecStats(
                steps=st["steps"],
                drafts=st["drafts"],
                draft_tokens=st["draft_tokens"],
                accepted=st["accepted"],
                forced=st["forced"],
                rejected=st["rejected"],
                accepted_per_pos=[round(p * st["drafts"]) for p in st["per_position"]],
            )
            stats.by_verdict.update(st["by_verdict"])
            first = r["tokens"] - st["accepted"] - len(r["decode_step_s"]) - (1 if st["drafts"] else 0)
            records.append(
                RequestRecord(
                    config=r["config"],
                    block=r["block"],
                    round=r["round"],
                    prompt=r["prompt"],
                    tokens=r["tokens"],
                    first_step_tokens=r.get("first_step_tokens", max(first, 1)),
                    steps=r["steps"],
                    wall_s=r["wall_s"],
                    ttft_s=r["ttft_s"],
                    decode_step_s=r["decode_step_s"],
                    stats=stats,
                    workload=name,
                )
            )
        specs = [ConfigSpec(x["method"], x["k"]) for x in wl["results"] if x["method"]]
        wl["results"] = [x.as_dict() for x in aggregate(records, specs)]
    return data


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="benchmarks/results")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--k", default="2,4,6,8")
    ap.add_argument("--from", dest="source", help="render an existing JSON result instead of running")
    ap.add_argument("--raw", action="store_true", help="raw text prefixes instead of conversations (bench --raw)")
    args = ap.parse_args()
    if args.source:
        print(markdown(reaggregate(json.loads(Path(args.source).read_text()))))
        return 0
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    argv = [
        "bench",
        "--workload",
        "toolcalls,prose",
        "--k",
        args.k,
        "--repeats",
        str(args.repeats),
        "--max-tokens",
        str(args.max_tokens),
        "--json",
        str(out / "spec_vs_target.json"),
        "--plot",
        str(out / "spec_vs_target.svg"),
        *(["--raw"] if args.raw else []),
    ]
    from specterm.cli import main as specterm_main

    sys.argv = ["specterm", *argv]  # so the JSON's "command" is the exact command line
    rc = specterm_main(argv)
    if rc == 0:
        print(markdown(json.loads((out / "spec_vs_target.json").read_text())))
    return rc


if __name__ == "__main__":  # vLLM spawns processes: the guard is required
    sys.exit(main())
