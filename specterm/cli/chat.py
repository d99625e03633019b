"""``specterm chat``: the dashboard and agent console on a live engine (or ``--replay FILE``).

It opens the default agent (``sql_analyst``; ``--agent NAME`` or ``$SPECTERM_AGENT`` picks
another); ``--agent none`` is plain multi-turn chat through the target's chat template (``--raw``:
each prompt as raw text). A model that cannot chat (the embedded pair speaks only the agent format)
is refused in one line before anything starts.

The engine is built on a worker thread after the UI is up, so the screen shows "starting engine…"
instead of a frozen terminal; if it cannot start (e.g. the vLLM extra is missing) the app shows
"engine failed to start: <reason>" instead of a traceback. Engine flags are ``run``'s.

The engine and the agent run in a process of their own (``session/process.py``) so that drawing the
dashboard never takes the GIL from them; ``--engine-in-process`` keeps them in the app's process
(one interpreter, e.g. to debug it).
"""

from __future__ import annotations

import argparse
import os

DEFAULT_AGENT = "sql_analyst"


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "chat", help="interactive dashboard and chat console (live engine or --replay)", description=__doc__
    )
    add_chat_args(p)
    p.set_defaults(func=handle)


def add_chat_args(p: argparse.ArgumentParser) -> None:
    """The app's flags; ``serve`` adds them too and hands them on to the ``chat`` it serves."""
    from specterm.cli.common import add_engine_args, add_generation_args

    add_engine_args(p)
    add_generation_args(p)
    p.add_argument(
        "--agent",
        metavar="NAME",
        default=os.environ.get("SPECTERM_AGENT") or DEFAULT_AGENT,
        help=f"the agent (agents/NAME): retrieval, schema-constrained tool calls, answer "
        f"(default {DEFAULT_AGENT}); 'none' for plain chat with the model",
    )
    p.add_argument("--raw", action="store_true", help="plain chat only: send each prompt as raw text (no template)")
    p.add_argument("--system", metavar="TEXT", help="plain chat only: a system message")
    p.add_argument("--replay", metavar="FILE", help="open a recorded session instead of a live engine")
    p.add_argument("--speed", type=float, default=1.0, help="replay speed (0 = as fast as possible)")
    p.add_argument(
        "--theme", help="theme name (specterm-dark, specterm-light, specterm-high-contrast, or a user theme)"
    )
    p.add_argument(
        "--theme-file",
        action="append",
        default=[],
        metavar="FILE",
        help="load a theme file (TOML/JSON; repeatable); a broken file is reported and skipped",
    )
    p.add_argument("--no-gpu", action="store_true", help="do not sample NVML (GPU panel off)")
    p.add_argument(
        "--engine-in-process",
        action="store_true",
        help="run the engine in the app's process instead of its own (slower with the dashboard)",
    )
    from specterm.cli.common import add_record_args

    add_record_args(p)


def check_live_args(args: argparse.Namespace):
    """(generation params, agent or ``None``, engine config) for a live chat, or the one-line error a
    bad flag gets, before any engine or UI starts (``serve`` runs it once before serving)."""
    from specterm.cli.common import engine_config_from_args, generation_params, preflight
    from specterm.engine.chat import ChatPrompt
    from specterm.errors import ConfigError

    params = generation_params(max_tokens=args.max_tokens, temperature=args.temperature)
    agent = None
    plain = args.agent.strip().lower() in ("none", "")
    if not plain:
        from specterm.agent import load_agent

        if args.raw or args.system:
            raise ConfigError(
                "--raw and --system are for plain chat (--agent none); an agent writes its own conversation"
            )
        agent = load_agent(args.agent)  # a bad name or definition fails before anything starts
    config = engine_config_from_args(args)
    if plain and not args.raw:
        preflight(config, ChatPrompt.user("hello"))  # a model that cannot chat: one line, nothing starts
    return params, agent, config


def handle(args: argparse.Namespace) -> int:
    from specterm.ui.app import make_app, run_replay_app

    ui = dict(theme=args.theme, theme_files=args.theme_file)
    if args.replay:
        from specterm.cli.replay import is_compare_file

        if is_compare_file(args.replay):  # a `specterm compare` recording: its split view
            from specterm.session.reader import read_session
            from specterm.ui.compare_app import run_compare_replay

            return run_compare_replay(read_session(args.replay), speed=args.speed or float("inf"))
        from specterm.config import load_thresholds

        return run_replay_app(args.replay, speed=args.speed, thresholds=load_thresholds(), **ui)

    from functools import partial

    from specterm.cli.common import recorder_from_args, session_header
    from specterm.config import load_thresholds
    from specterm.diagnose import Diagnoser
    from specterm.engine import SessionClock, load_engine
    from specterm.session.live import LiveSession, make_runner

    params, agent, config = check_live_args(args)
    clock = SessionClock()
    header = session_header(config, agent=agent.name if agent else None)
    recorder = recorder_from_args(args, header)
    # Module-level functions and partials only: they are pickled into the engine process.
    engine_factory = partial(load_engine, config, clock=clock)  # called on the app's worker thread
    runner_factory = partial(
        make_runner,
        agent=agent,
        params=params,
        clock=clock,
        raw=args.raw,
        system=args.system,
        temperature=args.temperature,
    )
    if not args.engine_in_process:
        from specterm.session.process import process_factories

        engine_factory, runner_factory = process_factories(engine_factory, runner_factory)
    session = LiveSession(
        header=header,
        engine_factory=engine_factory,
        runner_factory=runner_factory,
        recorder=recorder,
        clock=clock,
        diagnoser=Diagnoser(load_thresholds()),
    )
    app = make_app(
        session=session,
        gpu=not args.no_gpu,
        intro=_intro(agent, config, raw=args.raw),
        placeholder="Ask the agent…" if agent else "Type a message…",
        **ui,
    )
    try:
        app.run()
    finally:
        session.close()
        if recorder is not None:
            print(f"specterm: session recorded to {recorder.path}")
    return 0


def _intro(agent, config, *, raw: bool) -> str:
    """The first thing a newcomer reads: who answers, and a question to try."""
    if agent is None:
        how = "as raw text to complete" if raw else "through its chat template"
        return f"Plain chat with {config.target}: each message goes {how}."
    text = f"Agent {agent.name}: {agent.description or agent.system.splitlines()[0]}"
    if agent.examples:
        text += f"\nTry: {agent.examples[0]}"
    return text
