"""``specterm run PROMPT``: one request, headless, each token styled by its verdict.

PROMPT is a user message rendered by the target's chat template (``--system`` adds a system
message); ``--raw`` sends it as plain text to complete instead; ``--agent NAME`` sends it to an agent.
"""

from __future__ import annotations

import argparse

from specterm.cli.common import (
    add_engine_args,
    add_generation_args,
    engine_config_from_args,
    generation_params,
    preflight,
    session_header,
)
from specterm.errors import ConfigError


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("run", help="run one prompt headless and stream verdict-styled tokens", description=__doc__)
    p.add_argument("prompt", help="the prompt text ('-' reads standard input)")
    add_engine_args(p)
    add_generation_args(p)
    p.add_argument("--schema", metavar="FILE", help="constrain output to this JSON Schema")
    p.add_argument("--raw", action="store_true", help="send PROMPT as raw text to complete (no chat template)")
    p.add_argument("--system", metavar="TEXT", help="a system message before PROMPT (chat mode)")
    p.add_argument("--json", action="store_true", help="print one event per line (JSONL) instead")
    p.add_argument("--show-rejected", action="store_true", help="show rejected draft tokens, struck through")
    p.add_argument(
        "--agent",
        metavar="NAME",
        help="send PROMPT to this agent (agents/NAME or $SPECTERM_AGENTS_DIR/NAME): retrieval, "
        "tool calls, answer; the agent's own limits replace --max-tokens",
    )
    from specterm.cli.common import add_record_args

    add_record_args(p)
    p.set_defaults(func=handle)


def handle(args: argparse.Namespace) -> int:
    import sys

    from specterm.cli.common import recorder_from_args
    from specterm.config import load_thresholds
    from specterm.diagnose import Diagnoser
    from specterm.engine import SessionClock, load_engine
    from specterm.engine.chat import ChatPrompt, check_fits
    from specterm.engine.schema import load_schema_file
    from specterm.events import SessionEnded
    from specterm.headless import HeadlessPrinter
    from specterm.session.live import LiveSession, plain_runner

    prompt = sys.stdin.read() if args.prompt == "-" else args.prompt
    if args.agent:
        return run_agent(args, prompt)
    schema = load_schema_file(args.schema) if args.schema else None
    params = generation_params(max_tokens=args.max_tokens, temperature=args.temperature, json_schema=schema)
    if args.raw and args.system:
        raise ConfigError("--system needs chat mode; drop --raw (raw text has no roles)")
    config = engine_config_from_args(args)
    thresholds = load_thresholds()  # a bad [diagnose] value fails before the engine starts
    request = prompt if args.raw else ChatPrompt.user(prompt, system=args.system)
    preflight(config, request)
    clock = SessionClock()
    engine = load_engine(config, clock=clock)
    try:  # a template that refuses or a prompt too long: one line before anything is recorded
        check_fits(len(engine.renderer.ids(request)), engine.max_model_len)
    except ConfigError:
        engine.close()
        raise
    printer = HeadlessPrinter(json=args.json, show_rejected=args.show_rejected)
    header = session_header(config)
    session = LiveSession(
        header=header,
        engine=engine,
        recorder=recorder_from_args(args, header),
        clock=clock,
        runner=plain_runner(engine, params, clock, raw=args.raw, system=args.system),
        diagnoser=Diagnoser(thresholds),
    )
    if args.json:
        printer(header)  # so `run --json > file` is itself a replayable session
    try:
        session.run(prompt, printer)
    finally:
        session.close()  # the recording's session_ended is written by the recorder itself
    if args.json:
        printer(SessionEnded(t=clock()))
    printer.finish()
    if engine.capabilities.sampling_verification_broken and args.temperature > 0 and not args.json:
        printer.err.print(
            "specterm: warning: temperature > 0 on the vLLM CPU build — specterm's "
            "sampling fix is not installed here (vLLM issue 55005); treat these verdicts as suspect",
            markup=False,
        )
    return 0


def run_agent(args: argparse.Namespace, prompt: str) -> int:
    """``run --agent NAME PROMPT``: one agent request, headless (or ``--json`` events)."""
    from specterm.agent import load_agent, validate_request
    from specterm.cli.common import recorder_from_args
    from specterm.config import load_thresholds
    from specterm.diagnose import Diagnoser
    from specterm.engine import SessionClock, load_engine
    from specterm.events import SessionEnded
    from specterm.headless import HeadlessPrinter
    from specterm.session.live import LiveSession, agent_runner

    if args.schema:
        raise ConfigError("--schema cannot be combined with --agent (the agent's tool schemas constrain output)")
    if args.raw or args.system:
        raise ConfigError("--raw and --system cannot be combined with --agent (the agent writes its own conversation)")
    agent = load_agent(args.agent)  # a bad name or definition fails before the engine starts
    problem = validate_request(prompt)
    if problem:
        raise ConfigError(f"bad request: {problem}")
    config = engine_config_from_args(args)
    thresholds = load_thresholds()  # a bad [diagnose] value fails before the engine starts
    clock = SessionClock()
    engine = load_engine(config, clock=clock)
    printer = HeadlessPrinter(json=args.json, show_rejected=args.show_rejected)
    header = session_header(config, agent=agent.name)
    session = LiveSession(
        header=header,
        engine=engine,
        recorder=recorder_from_args(args, header),
        clock=clock,
        runner=agent_runner(agent, engine, temperature=args.temperature, clock=clock),
        diagnoser=Diagnoser(thresholds),
    )
    if args.json:
        printer(header)
    try:
        result = session.run(prompt, printer)
    finally:
        session.close()
    if args.json:
        printer(SessionEnded(t=clock()))
    printer.finish()
    return 0 if result.ok else 1
