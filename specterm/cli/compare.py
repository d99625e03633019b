"""``specterm compare PROMPT --a SPEC --b SPEC``: the same request through two speculative
configurations, side by side — which draft / method / k is better for this prompt?

A SPEC is ``key=value`` pairs over the engine flags: ``method=draft_model,k=4``, ``method=ngram,k=6``,
``method=none`` (target-only), ``draft=DIR`` (two drafts), ``target=DIR``, ``dtype=...``; what a side
does not set comes from the engine flags (``--target``, ``--draft``, ``--method``, ``-k`` …). Both
sides must share one tokenizer (refused before anything loads). ``--agent NAME`` sends PROMPT to an
agent instead.

How it is fair: each side is its own engine (a speculative configuration is fixed when vLLM builds
one), both loaded in this process before anything is measured; one unmeasured warm-up request each;
``--rounds N`` alternates A B, B A, A B …, so neither side always runs first; every measured run
starts from a cold prefix cache; both share one clock. The winner is the side with the smaller total
wall time over the rounds.

At temperature 0 both sides are lossless, so their outputs must be token-identical: if they are not,
that is said loudly (a red banner; headless, a ``specterm: error:`` line and exit status 1).

The default opens the split view; ``--headless`` prints each side's verdict-styled output and a
side-by-side table (acceptance, mean acceptance length, per-step latency, decode rate, wall, who
won), ``--json`` the figures as one JSON object. The session is recorded as one file that ``specterm
replay`` opens as the same split view.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from typing import Any

from specterm.cli.common import add_engine_args, add_generation_args


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "compare",
        help="A/B two speculative configurations on the same request",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("prompt", help="the request ('-' reads standard input)")
    p.add_argument("--a", required=True, metavar="SPEC", help="side A, e.g. method=draft_model,k=4")
    p.add_argument("--b", required=True, metavar="SPEC", help="side B, e.g. method=ngram,k=6")
    add_engine_args(p)
    p.add_argument(
        "--rounds", type=int, default=1, help="measured runs per side, alternating A B, B A … (default %(default)s)"
    )
    add_generation_args(p)
    p.add_argument("--raw", action="store_true", help="send PROMPT as raw text to complete (no chat template)")
    p.add_argument("--agent", metavar="NAME", help="send PROMPT to this agent on each side")
    p.add_argument("--headless", action="store_true", help="print a side-by-side summary instead of the split view")
    p.add_argument("--json", action="store_true", help="headless: the figures as one JSON object")
    from specterm.cli.common import add_record_args

    add_record_args(p)
    p.set_defaults(func=handle)


def handle(args: argparse.Namespace) -> int:
    from specterm.bench.compare import CompareRun, check_sides, compare_header, parse_side, side_config
    from specterm.cli.common import engine_config_from_args, generation_params, recorder_from_args
    from specterm.engine import SessionClock
    from specterm.errors import ConfigError

    prompt = sys.stdin.read() if args.prompt == "-" else args.prompt
    if args.json:
        args.headless = True
    sides = parse_side(args.a, "--a"), parse_side(args.b, "--b")  # flag typos before anything is built
    if args.rounds < 1:
        raise ConfigError("--rounds must be at least 1")
    params = generation_params(max_tokens=args.max_tokens, temperature=args.temperature)
    agent = None
    if args.agent:
        from specterm.agent import load_agent, validate_request

        if args.raw:
            raise ConfigError("--raw cannot be combined with --agent (the agent writes its own conversation)")
        agent = load_agent(args.agent)
        if problem := validate_request(prompt):
            raise ConfigError(f"bad request: {problem}")
    base = engine_config_from_args(args)
    a, b = side_config(base, sides[0], "--a"), side_config(base, sides[1], "--b")
    check_sides(a, b)  # paths and tokenizers: one line, before any engine loads
    request = {"prompt": prompt, "raw": args.raw} | ({"agent": agent.name} if agent else {})
    header = compare_header(a, b, rounds=args.rounds, params=params, request=request)
    clock = SessionClock()
    run = CompareRun(a, b, prompt, params=params, rounds=args.rounds, agent=agent, raw=args.raw, clock=clock)
    recorder = recorder_from_args(args, header)
    if not args.headless and sys.stdout.isatty():
        from specterm.ui.compare_app import make_compare_app

        app = make_compare_app(header, run=run, recorder=recorder)
        app.run()
        return app.return_code or 0
    if not args.headless:
        print("specterm: note: standard output is not a terminal; comparing headless", file=sys.stderr)
    return _headless(run, header, recorder, as_json=args.json)


def _headless(run: Any, header: Any, recorder: Any, *, as_json: bool) -> int:
    from rich.console import Console

    events: list[Any] = []

    def sink(event: Any) -> None:
        if recorder is not None:
            recorder.write(event)
        events.append(event)

    err = Console(stderr=True, highlight=False, soft_wrap=True)
    try:
        run.load(progress=None if as_json else (lambda line: err.print(line, style="dim", markup=False)))
        tally = run.run(sink, header)
    finally:
        run.close()
        if recorder is not None:
            recorder.close()
    return print_report(header, events, tally, as_json=as_json)


def print_report(
    header: Any, events: Sequence[Any], tally: Any = None, *, as_json: bool = False, transcripts: bool = True
) -> int:
    """Each side's first run, verdict-styled, then the table and the winner; 1 when greedy outputs
    differ. Shared with ``specterm replay --headless`` of a compare session."""
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    from specterm.bench.compare_tally import LANES, CompareTally
    from specterm.events import SpecStep, UserMessage
    from specterm.render import inert, legend_text, step_text

    if tally is None:
        tally = CompareTally(header).add_all(events)
    mismatch = tally.mismatch
    if as_json:
        print(json.dumps(tally.as_dict(), indent=2))
    else:
        out = Console(highlight=False, soft_wrap=True)
        for lane in LANES if transcripts else ():
            out.print(Text(f"── {lane.upper()}: {tally.labels[lane]}", style="bold"))
            first_rid, text = None, Text()
            for event in events:
                if event.lane != lane:
                    continue
                if isinstance(event, UserMessage):
                    if first_rid is not None:
                        break  # the first run only: later rounds repeat it
                    first_rid = event.request_id
                elif isinstance(event, SpecStep):
                    text.append_text(step_text(event))
            out.print(text)
        if transcripts:
            out.print(legend_text())
        table = Table(title=inert(str(header.config["compare"].get("prompt", "")))[:60] or None)
        table.add_column("")
        table.add_column("A", justify="right")
        table.add_column("B", justify="right")
        for row in tally.rows() + tally.region_rows():
            table.add_row(*(inert(cell) for cell in row))
        out.print(table)
        out.print(Text(tally.verdict(), style="bold"))
    if mismatch is not None:
        print(f"specterm: error: {mismatch.message(tally.labels)}", file=sys.stderr)
        return 1
    return 0
