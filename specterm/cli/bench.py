"""``specterm bench``: speculative vs target-only on a workload, against the theoretical speed-up;
``specterm bench --sanity``: is this backend's speculative decoding correct?"""

from __future__ import annotations

import argparse
import datetime
import platform
import shlex
import sys
from typing import Any

from specterm.cli.common import add_engine_args, add_generation_args, engine_config_from_args, field_bounds
from specterm.cli.progress import run_progress
from specterm.errors import ConfigError, EngineUnavailable

DEFAULT_METHODS = ("draft_model", "ngram")
DEFAULT_KS = (2, 4, 6, 8)


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "bench", help="speculative vs target-only side by side, against the theoretical bound", description=__doc__
    )
    p.add_argument(
        "--workload",
        default="toolcalls",
        help="comma list of prompt sets: toolcalls, prose, code, extract, agent (whole agent turns)",
    )
    p.add_argument(
        "--agent", default="sql_analyst", help="agent for the toolcalls and agent workloads (default sql_analyst)"
    )
    p.add_argument(
        "--prompts",
        metavar="FILE",
        help="one user request per line (replaces --workload; with --raw, text to complete)",
    )
    p.add_argument(
        "--requests",
        metavar="FILE.jsonl",
        help="your traffic: one OpenAI chat-completions request body per line (messages, tools, "
        "tool_choice, response_format, max_tokens, temperature); replaces --workload",
    )
    p.add_argument(
        "--raw",
        action="store_true",
        help="send raw text prefixes to complete instead of conversations (no chat template)",
    )
    # One flag each for the methods and the draft lengths swept; the engine's single-value spellings
    # (--method, -k, --num-speculative-tokens) are their aliases here, shown once in --help.
    p.add_argument(
        "--methods",
        "--method",
        metavar="LIST",
        help=f"comma list of speculation methods (default {','.join(DEFAULT_METHODS)})",
    )
    lo, hi = field_bounds("num_speculative_tokens")
    p.add_argument(
        "--k",
        "-k",
        "--num-speculative-tokens",
        dest="ks",
        metavar="LIST",
        help=f"comma list of draft lengths, each {lo}..{hi} (default {','.join(map(str, DEFAULT_KS))})",
    )
    p.add_argument("--repeats", type=int, default=3, help="rounds per configuration (default %(default)s)")
    add_generation_args(
        p,
        max_tokens=64,
        why="what the bench results in benchmarks/results were measured with, so a rerun without the flag compares",
    )
    p.add_argument("--json", metavar="FILE", help="write all results (and the per-request records) as JSON")
    p.add_argument("--plot", metavar="FILE.svg", help="write the speed-up plot and table as SVG")
    p.add_argument(
        "--recommend",
        action="store_true",
        help="write the fastest configuration (or 'none' when nothing beats target-only) to the "
        "config file, with its expected speed-up for the dashboard",
    )
    p.add_argument(
        "--print-speculative-config",
        action="store_true",
        help="with --concurrency: print the measured k-per-batch-size schedule as the ready "
        "--speculative-config JSON for vllm serve / specterm vllm-serve",
    )
    p.add_argument(
        "--suffix-cold",
        action="store_true",
        help="reset suffix decoding's tree before every measured request (default: it keeps "
        "learning across them, as in a session)",
    )
    p.add_argument(
        "--concurrency",
        metavar="LEVELS",
        help="instead: speculation under load, e.g. 1,2,4,8: that many requests in flight at once "
        "on each engine, output throughput ratio per level and where speculation stops paying",
    )
    p.add_argument(
        "--sanity",
        action="store_true",
        help="instead: check draft = target accepts ≈100%% and greedy output is lossless",
    )
    p.add_argument("--temperatures", default="0,1", help="temperatures for --sanity (default %(default)s)")
    add_engine_args(p, method_and_k=False)
    p.set_defaults(func=handle)


def _list(value: str | None, default: tuple, cast, flag: str) -> list:
    if value is None:
        return list(default)
    try:
        items = [cast(v.strip()) for v in value.split(",") if v.strip()]
    except ValueError:
        raise ConfigError(f"bad {flag}: {value!r} (expected a comma-separated list)") from None
    if not items:
        raise ConfigError(f"bad {flag}: empty list")
    return items


def handle(args: argparse.Namespace) -> int:
    from rich.console import Console

    if args.no_spec:
        raise ConfigError("bench always runs target-only next to speculation; drop --no-spec")
    if args.recommend and args.sanity:
        raise ConfigError("--recommend needs a speed bench; drop --sanity")
    if args.concurrency and args.sanity:
        raise ConfigError("--sanity and --concurrency are separate runs; pick one")
    if args.print_speculative_config and not args.concurrency:
        raise ConfigError("--print-speculative-config needs --concurrency (a schedule is measured under load)")
    if args.concurrency and (args.recommend or args.print_speculative_config):
        from specterm.bench.schedule import MIN_LEVELS

        if len(set(_list(args.concurrency, (), int, "--concurrency"))) < MIN_LEVELS:
            raise ConfigError(
                f"--recommend with --concurrency builds a k-per-batch-size schedule: it needs at "
                f"least {MIN_LEVELS} levels, e.g. --concurrency 1,2,4,8"
            )
    console = Console(highlight=False)
    base = engine_config_from_args(args)
    if args.sanity:
        temps = _list(args.temperatures, (0.0, 1.0), float, "--temperatures")
        if any(t < 0 or t > 5 for t in temps):
            raise ConfigError(f"bad --temperatures: {args.temperatures!r} (each must be in 0..5)")
        return sanity(base, temps, console, json_path=args.json)
    if args.concurrency:
        return load_sweep(args, base, console)
    return bench(args, base, console)


def load_sweep(args: argparse.Namespace, base, console) -> int:
    """``bench --concurrency``: each level on target-only and each speculative configuration."""
    from specterm.bench.load import LoadSweep, summarize
    from specterm.bench.load_report import show, write_load_svg
    from specterm.bench.report import write_json

    levels = _list(args.concurrency, (), int, "--concurrency")
    names = _list(args.workload, (), str, "--workload")
    if (
        "agent" in names and not args.prompts and not args.requests
    ):  # whole agent turns are sequential: their first calls load it
        console.print(
            "note: under --concurrency the agent workload runs as its first tool-call turns "
            "(toolcalls): an agent turn's steps depend on each other",
            style="yellow",
        )
        names = ["toolcalls" if n == "agent" else n for n in names]
    if len(names) != 1 and not args.prompts and not args.requests:
        raise ConfigError("--concurrency takes one workload at a time")
    params, specs = _params(args), _specs(args, base)
    workloads = _workloads(args, names, base, console)
    ((name, prompts),) = workloads.items()
    sweep = LoadSweep(
        base,
        prompts,
        specs,
        levels,
        params=params,
        repeats=args.repeats,
        request_params=(getattr(args, "request_params", None) or {}).get(name),
    )
    with run_progress(console, sweep.total_runs) as progress:
        sweep.run(progress)
    results = summarize(sweep.runs)
    title = (
        f"workload {name} under load: {len(prompts)} prompts, max(prompts, 2 × level) requests per run, "
        f"{args.repeats} round(s), max_tokens {args.max_tokens}"
    )
    show(console, results, title=title)
    if args.plot:
        write_load_svg(args.plot, results, title=title)
    measured = _schedule(results, sweep, console) if args.recommend or args.print_speculative_config else None
    if args.print_speculative_config:
        _print_speculative_config(base, measured, console)
    rec = _recommend_load(results, base, console, measured) if args.recommend else None
    if args.json:
        write_json(
            args.json,
            {
                "meta": _meta(base, args, workloads) | {"concurrency": sorted(set(levels))},
                "results": [r.as_dict() for r in results],
                **({"recommendation": rec.model_dump()} if rec else {}),
                "runs": [
                    {k: v for k, v in r.__dict__.items() if k != "stats"} | {"stats": r.stats.as_dict()}
                    for r in sweep.runs
                ],
            },
        )
    return 0


def _params(args: argparse.Namespace):
    from specterm.cli.common import generation_params

    return generation_params(max_tokens=args.max_tokens, temperature=args.temperature)


def _workloads(args: argparse.Namespace, names: list[str], base, console) -> dict[str, list]:
    """Requests per workload, rendered once with the target's template before any engine loads.
    ``--requests``: the file's requests, whose own parameters go to ``args.request_params``."""
    from specterm.bench.workloads import prompts_from_file, resolve
    from specterm.cli.common import target_renderer
    from specterm.engine.chat import ChatPrompt

    renderer = target_renderer(base.model_copy(update={"method": None}))  # bench picks the methods
    if args.requests:
        return {"requests": _request_file(args, renderer, console)}
    if args.prompts:
        lines = prompts_from_file(args.prompts)
        if args.raw:
            return {"file": lines}
        requests = [ChatPrompt.user(line) for line in lines]
        if renderer is not None:
            for r in requests:
                renderer.text(r)  # no template / a template that refuses: one line, says --raw
        return {"file": requests}
    out = resolve(
        names,
        renderer=renderer,
        agent=args.agent,
        raw=args.raw,
        notes=lambda msg: console.print(f"note: {msg}", style="yellow", highlight=False),
    )
    _constrain(args, out, renderer)
    return out


def _constrain(args: argparse.Namespace, workloads: dict[str, list], renderer) -> None:
    """Workloads whose senders constrain them (``workloads.output_schema``) get their schema in each
    request's parameters (``args.request_params``)."""
    from specterm.bench.workloads import output_schema

    params = _params(args)
    for name, prompts in workloads.items():
        raw = args.raw or (name == "toolcalls" and isinstance(prompts[0], str))  # prefixes start mid-JSON
        schema = output_schema(name, agent=args.agent, renderer=renderer, raw=raw)
        if schema is not None:
            own = args.request_params = getattr(args, "request_params", None) or {}
            own[name] = [params.model_copy(update={"json_schema": schema})] * len(prompts)


def _request_file(args: argparse.Namespace, renderer, console) -> list:
    """The runnable requests of ``--requests``; every line that cannot run is reported, not dropped silently."""
    from specterm.bench.requests_file import read_requests

    if args.raw or args.prompts:
        raise ConfigError("--requests brings its own conversations: drop --raw and --prompts")
    requests, bad = read_requests(args.requests)
    kept = []
    for r in requests:
        try:
            if renderer is not None:
                renderer.text(r.prompt)  # the target's template must take it (tools=, tool_calls)
            kept.append(r)
        except ConfigError as err:
            bad.append(f"line {r.line}: {err}")
    for line in sorted(bad, key=lambda b: int(b.split()[1].rstrip(":"))):
        console.print(f"skipped {args.requests} {line}", style="yellow", highlight=False, markup=False, soft_wrap=True)
    if not kept:
        raise ConfigError(f"--requests file {args.requests}: no request can run")
    kinds: dict[str, int] = {}
    for r in kept:
        kinds[r.constraint.split()[0]] = kinds.get(r.constraint.split()[0], 0) + 1
    console.print(
        f"{args.requests}: {len(kept)} requests ({', '.join(f'{n} {k}' for k, n in kinds.items())})"
        + (f", {len(bad)} skipped" if bad else ""),
        highlight=False,
        markup=False,
        soft_wrap=True,
    )
    args.request_params = {"requests": [r.params for r in kept]}
    return [r.prompt for r in kept]


def _specs(args: argparse.Namespace, base) -> list:
    from specterm.bench.runner import METHODS, plan

    methods = _list(args.methods, DEFAULT_METHODS, str, "--methods")
    ks = _list(args.ks, DEFAULT_KS, int, "--k")
    if bad := [m for m in methods if m not in METHODS]:
        raise ConfigError(f"bad --methods: {bad[0]!r}; bench supports {', '.join(METHODS)}")
    lo, hi = field_bounds("num_speculative_tokens")
    if bad := [k for k in ks if not lo <= k <= hi]:
        raise ConfigError(f"bad --k: {bad[0]} (each must be {lo}..{hi})")
    if any(m.startswith("draft_model") for m in methods) and not base.draft:
        raise ConfigError("method draft_model needs a draft model (--draft PATH)")
    if "suffix" in methods:
        from specterm.engine.suffix import suffix_decoding_problem

        if problem := suffix_decoding_problem():
            raise EngineUnavailable(problem)
    if args.repeats < 1:
        raise ConfigError("bad --repeats: must be >= 1")
    # plain draft_model is vLLM's drafting unless --grammar-drafting asks (draft_model+grammar compares)
    specs = plan(methods, ks, grammar=base.grammar_drafting is True)
    if base.spec_schedule is not None:
        if not args.concurrency:
            raise ConfigError(
                "a spec schedule picks k by batch size, and this bench runs one request at a time "
                "(batch size 1): measure it under load with --concurrency"
            )
        from specterm.bench.runner import ConfigSpec

        schedule = tuple(tuple(r) for r in base.spec_schedule)
        specs.append(ConfigSpec(base.method, base.num_speculative_tokens, bool(base.grammar_drafting), schedule))
    return specs


def bench(args: argparse.Namespace, base, console) -> int:
    from specterm.bench.report import (
        acceptance_table,
        results_table,
        speedup_plot,
        to_json,
        ttft_steps_table,
        turns_table,
        write_json,
        write_svg,
    )
    from specterm.bench.results import aggregate
    from specterm.bench.runner import BenchRunner
    from specterm.bench.workloads import describe

    params, specs = _params(args), _specs(args, base)
    names = _list(args.workload, (), str, "--workload")
    if not args.prompts and not args.requests and {"agent", "toolcalls"} & set(names):
        from specterm.agent import load_agent

        load_agent(args.agent)  # a bad name is one line now, not after the engines load
    workloads = _workloads(args, names, base, console)
    runner = BenchRunner(
        base,
        workloads,
        specs,
        repeats=args.repeats,
        params=params,
        agent=args.agent,
        suffix_cold=args.suffix_cold,
        request_params=getattr(args, "request_params", None),
    )
    with run_progress(console, runner.total_requests) as progress:
        runner.run(progress)
    meta = _meta(base, args, workloads)
    out: dict[str, Any] = {"meta": meta, "workloads": {}}
    per_workload = {}
    for name in workloads:
        recs = [r for r in runner.records if r.workload == name]
        results = per_workload[name] = aggregate(recs, specs)
        limit = f"agent {args.agent}'s max_tokens" if name == "agent" else f"max_tokens {args.max_tokens}"
        title = f"workload {name}: {len(workloads[name])} prompts × {args.repeats} rounds, {limit}"
        console.print(results_table(results, title=title))
        console.print(acceptance_table(results))
        if (steps := ttft_steps_table(results)) is not None:
            console.print(steps)
        if any(s.method == "suffix" for s in specs) and len(workloads) == 1:  # turn 1 = the block's first
            console.print(turns_table(recs, [s.label for s in specs], len(workloads[name])))
        console.print(speedup_plot(results))
        out["workloads"][name] = to_json(results, {"prompts": [describe(p) for p in workloads[name]]})
        if args.plot:
            write_svg(args.plot if len(workloads) == 1 else _suffixed(args.plot, name), results, title=title)
    if args.recommend:
        out["recommendation"] = _recommend(per_workload, base, console).model_dump()
    if args.json:
        out["records"] = [_record(r) for r in runner.records]
        write_json(args.json, out)
    return 0


def _recommend(per_workload: dict, base, console):
    from specterm.bench import recommend

    rec = recommend.choose(per_workload, base)
    why = (
        f"{rec.speedup:.2f}× decode speed-up over target-only"
        if rec.method != recommend.NO_SPECULATION
        else "no speculative configuration beat target-only"
    )
    return _write_recommendation(
        rec, console, "recommendation: ", rec.label, f" ({why}; workloads {', '.join(per_workload)})"
    )


def _schedule(results, sweep, console):
    """The measured schedule (``bench/schedule.py``), said in one line; None when speculation never paid."""
    from specterm.bench.schedule import batch_sizes, build

    top = sweep.max_num_seqs or 256  # vLLM's default when the engine did not say
    measured = build(results, batch_sizes(sweep.runs), top)
    console.print(
        f"schedule (max_num_seqs {top}): {measured.describe()}"
        if measured
        else "schedule: speculation beat target-only at no level; no schedule"
    )
    return measured


def _speculative_config(base, measured) -> dict | None:
    from specterm.bench.runner import GRAMMAR_SUFFIX

    if measured is None:
        return None
    method = measured.method.removesuffix(GRAMMAR_SUFFIX)
    config = base.model_copy(
        update={"method": method, "num_speculative_tokens": measured.k_max, "spec_schedule": measured.schedule}
    )
    return config.speculative_config()


def _print_speculative_config(base, measured, console) -> None:
    """The JSON for ``vllm serve --speculative-config`` on stdout, alone on its line (scripts take it)."""
    import json

    spec = _speculative_config(base, measured)
    if spec is None:
        console.print("no --speculative-config: serve without speculation", style="yellow")
        return
    print(json.dumps(spec), flush=True)


def _recommend_load(results, base, console, measured=None):
    from specterm.bench.load import recommend_per_load

    rec = recommend_per_load(results, base)
    if measured is not None:
        from specterm.bench.runner import GRAMMAR_SUFFIX

        method = measured.method.removesuffix(GRAMMAR_SUFFIX)
        grammar = measured.method.endswith(GRAMMAR_SUFFIX)
        rec = rec.model_copy(
            update={
                "method": method,
                "k": measured.k_max,
                "spec_schedule": measured.schedule,
                "draft": base.draft if method == "draft_model" else None,
                # as recommend_per_load: only a measured comparison decides grammar drafting
                "grammar_drafting": (grammar or rec.grammar_drafting) if method == "draft_model" else None,
            }
        )
    per = ", ".join(f"{lv}: {label}" for lv, label in (rec.per_load or {}).items())
    off = (
        f"; speculation off from {rec.speculation_off_from} in flight"
        if rec.speculation_off_from
        else "; speculation pays at every level measured"
    )
    return _write_recommendation(
        rec,
        console,
        "recommendation per load: ",
        per,
        f"{off}; {rec.label} (measured at concurrency {rec.concurrency})",
    )


def _write_recommendation(rec, console, title: str, headline: str, detail: str):
    """Write ``rec`` into the config file and say so in one line (both bench modes)."""
    from rich.text import Text

    from specterm.bench import recommend
    from specterm.paths import config_file

    path = config_file()
    recommend.write(path, rec)
    console.print(Text.assemble((title, "bold"), (headline, "bold green"), f"{detail} → written to {path}"))
    return rec


def _suffixed(path: str, name: str) -> str:
    stem, dot, ext = path.rpartition(".")
    return f"{stem}-{name}.{ext}" if dot else f"{path}-{name}"


def _record(r) -> dict[str, Any]:
    return {
        "workload": r.workload,
        "config": r.config,
        "block": r.block,
        "round": r.round,
        "prompt": r.prompt,
        "text": r.text,
        "tokens": r.tokens,
        "first_step_tokens": r.first_step_tokens,
        "steps": r.steps,
        "wall_s": r.wall_s,
        "ttft_s": r.ttft_s,
        "step_ttft_s": r.step_ttft_s,
        "step_cached": r.step_cached,
        "decode_step_s": r.decode_step_s,
        "stats": r.stats.as_dict(),
    }


def _meta(base, args: argparse.Namespace, workloads: dict) -> dict[str, Any]:
    from specterm.engine.installs import vllm_label

    return {
        "date": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
        "command": "specterm " + shlex.join(sys.argv[1:]) if sys.argv[0].endswith("specterm") else shlex.join(sys.argv),
        "host": f"{platform.node()} ({platform.system()} {platform.machine()}, Python {platform.python_version()})",
        "vllm": vllm_label(),
        "engine": base.model_dump(),
        "repeats": args.repeats,
        "max_tokens": args.max_tokens,
        "temperature": args.temperature,
        "workloads": list(workloads),
        "raw": args.raw,
        "suffix_cold": args.suffix_cold,
    }


def sanity(base, temps: list[float], console, *, json_path: str | None = None) -> int:
    from rich.text import Text

    from specterm.bench.report import write_json
    from specterm.bench.sanity import judge, run_sanity

    with console.status("sanity check: loading engines") as status:
        runs = run_sanity(base, temperatures=temps, progress=lambda msg: status.update(f"sanity check: {msg}"))
    violations = judge(runs)
    for run in runs:
        rate = run.stats.acceptance_rate
        pos = " ".join(f"{p:.2f}" for p in run.stats.per_position)
        same = (
            ""
            if run.reference is None
            else ("  output = target-only" if run.outputs == run.reference else "  output ≠ target-only")
        )
        if run.distribution is not None:
            mark = "same distribution as target-only" if run.distribution.ok else "DIFFERENT distribution"
            console.print(Text.assemble((f"{run.config}: ", "bold"), f"{mark} — {run.distribution.describe()}"))
            continue
        console.print(
            Text.assemble(
                (f"{run.config}: ", "bold"),
                f"acceptance {'–' if rate is None else f'{rate:.1%}'} (per position {pos}){same}",
            )
        )
    for v in violations:
        console.print(Text.assemble(("✗ SANITY VIOLATION ", "bold red"), str(v)))
    if not violations:
        console.print(Text("✓ sanity: speculative decoding is correct on this backend", style="bold green"))
    if json_path:
        write_json(
            json_path,
            {
                "ok": not violations,
                "violations": [str(v) for v in violations],
                "runs": [
                    {
                        "check": r.check,
                        "config": r.config,
                        "temperature": r.temperature,
                        **r.stats.as_dict(),
                        "lossless": None if r.reference is None else r.outputs == r.reference,
                        "distribution": None if r.distribution is None else r.distribution.describe(),
                    }
                    for r in runs
                ],
            },
        )
    return 1 if violations else 0
