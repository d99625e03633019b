"""``specterm attach [ADDR ...]``: watch ``vllm serve`` servers that run specterm's publishing scheduler.

Start the server with ``specterm vllm-serve MODEL [vLLM flags]`` (or add ``--scheduler-cls
specterm.engine.publish.PublishingScheduler`` to your own ``vllm serve`` command), then attach: every
request the server runs, from any client, appears with each token coloured by its verdict.

Several addresses (or --fleet FILE) watch a fleet in one view: each server's data-parallel ranks are
found by themselves, every request is labelled with its replica and rank, and --metrics (one URL per
address) reconciles each replica with its own counters.

Privacy: the stream carries prompts and outputs. By default it is a Unix socket that only its owner can
open (0600, in a 0700 directory under $XDG_RUNTIME_DIR or the temp dir); attach refuses a socket that
belongs to another user. TCP (tcp://HOST:PORT) is used only when the server was asked for it, and then
needs the server's token (--token or $SPECTERM_PUBLISH_TOKEN).
"""

from __future__ import annotations

import argparse
import os

from specterm.engine import wire


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "attach",
        help="watch the verdicts of a running vllm serve (many requests, any client)",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "addr",
        nargs="*",
        metavar="ADDR",
        help=f"a server's publishing address: a socket path, ipc://PATH or tcp://HOST:PORT; several watch "
        f"them all in one view (default: ${wire.ENV_ADDR}, else {wire.default_socket_path()})",
    )
    p.add_argument(
        "--token",
        action="append",
        help=f"the server's token, for a tcp:// address: one for all, or one per address in order "
        f"(default: ${wire.ENV_TOKEN})",
    )
    p.add_argument(
        "--fleet",
        metavar="FILE",
        help="a TOML file listing the servers: [[replica]] tables with addr, and name, token or "
        "token_env (a variable holding it), metrics (docs/attach.md)",
    )
    p.add_argument(
        "--tokenizer", metavar="PATH", help="the served model's tokenizer, if the server's path is not readable here"
    )
    p.add_argument(
        "--headless",
        action="store_true",
        help="no dashboard: print each request as it finishes, tokens styled by verdict",
    )
    p.add_argument("--json", action="store_true", help="print one event per line (JSONL); implies --headless")
    p.add_argument("--show-rejected", action="store_true", help="show rejected draft tokens, struck through")
    p.add_argument("--max-requests", type=int, metavar="N", help="stop after N requests have finished")
    p.add_argument("--duration", type=float, metavar="S", help="stop after S seconds")
    p.add_argument(
        "--metrics",
        metavar="URL",
        action="append",
        help="the server's Prometheus endpoint (e.g. http://127.0.0.1:8000/metrics), one per address: at "
        "the end, check each replica's verdict counts against its own spec-decode counters",
    )
    p.add_argument("--theme", help="dashboard theme")
    from specterm.cli.common import add_record_args

    add_record_args(p)
    p.set_defaults(func=handle)


def handle(args: argparse.Namespace) -> int:
    from specterm.errors import ConfigError

    for name in ("max_requests", "duration"):
        value = getattr(args, name)
        if value is not None and value <= 0:
            raise ConfigError(f"--{name.replace('_', '-')} must be positive")
    targets = targets_from_args(args)
    hellos, notes = check_targets(targets)
    if args.headless or args.json:
        return run_headless(args, targets, hellos, notes)
    return run_dashboard(args, targets, hellos, notes)


def targets_from_args(args: argparse.Namespace) -> list:
    """The servers to watch, from the addresses (or the environment's, or the default) or the fleet
    file, each with its token and /metrics URL; one line for what does not add up."""
    from specterm.errors import ConfigError
    from specterm.session.fleet import Target, label_targets, load_fleet_file

    if args.fleet:
        if args.addr or args.token or args.metrics:
            raise ConfigError(
                "--fleet names the servers, their tokens and /metrics: give no ADDR, --token or --metrics"
            )
        return label_targets(load_fleet_file(args.fleet, dict(os.environ)))
    given = args.addr or [os.environ.get(wire.ENV_ADDR) or ""]
    for chosen in given:
        if wire.publishing_off(chosen):
            said = f"address {chosen!r}" if args.addr else f"{wire.ENV_ADDR}={chosen}"
            raise ConfigError(f"{said} means publishing is off: nothing to attach to; give the server's address")
    addrs = [wire.user_endpoint(a or None) for a in given]
    tokens = args.token or [os.environ.get(wire.ENV_TOKEN) or None]
    metrics = args.metrics or [None]
    if len(tokens) not in (1, len(addrs)):
        raise ConfigError(f"{len(tokens)} --token for {len(addrs)} addresses: give one for all, or one per address")
    if args.metrics and len(metrics) != len(addrs):
        raise ConfigError(f"{len(metrics)} --metrics for {len(addrs)} addresses: give one per address")
    targets = []
    for i, addr in enumerate(addrs):
        token = tokens[i] if len(tokens) > 1 else tokens[0]
        if addr.startswith("tcp://") and not token:
            raise ConfigError(f"{addr} needs the server's token: --token or ${wire.ENV_TOKEN}")
        targets.append(Target(addr, token, metrics[i] if len(metrics) > 1 else metrics[0]))
    return label_targets(targets)


def check_targets(targets: list) -> tuple[dict, list[str]]:
    """Each address checked before attaching (``check_address``): the sidecar hellos, by address, and
    a line for each address not up. One server that is not there is an error; in a fleet it is one
    line, and it is picked up when it comes."""
    from specterm.session.attach import AttachError, check_address

    hellos: dict = {}
    notes: list[str] = []
    for t in targets:
        try:
            hellos[t.addr] = check_address(t.addr)
        except AttachError as err:
            if len(targets) == 1:
                raise
            notes.append(f"{t.name}: {str(err).split('; ')[0]}; followed when it comes up")
    return hellos, notes


def make_recorder(args: argparse.Namespace):
    from specterm.cli.common import recorder_from_args

    return lambda header: recorder_from_args(args, header)


def run_dashboard(args: argparse.Namespace, targets: list, hellos: dict, notes: list[str]) -> int:
    from specterm.ui.attach_app import make_attach_app

    app = make_attach_app(
        targets,
        tokenizer=args.tokenizer,
        make_recorder=make_recorder(args),
        theme=args.theme,
        hellos=hellos,
        notes=notes,
    )
    try:
        app.run()
    finally:
        for sink in app.attach_sinks:
            sink.close()
            if sink.recorder is not None:
                print(f"specterm: recorded to {sink.recorder.path}")
    return 0


def run_headless(args: argparse.Namespace, targets: list, hellos: dict, notes: list[str]) -> int:
    import threading

    from specterm.config import load_thresholds
    from specterm.diagnose import Diagnoser
    from specterm.events import SessionEnded
    from specterm.headless import RequestBlockPrinter
    from specterm.session.fleet import Fleet, scrape_all
    from specterm.session.metrics import spec_counters_by_engine
    from specterm.session.recording_sink import RecordingSink

    printer = RequestBlockPrinter(json=args.json, show_rejected=args.show_rejected)
    sink = RecordingSink(printer, make_recorder(args), Diagnoser(load_thresholds()))
    fleet = Fleet(targets, sink, tokenizer=args.tokenizer, max_requests=args.max_requests, hellos=hellos, notes=notes)
    urls = [t.metrics for t in targets if t.metrics]
    before = scrape_all(urls, spec_counters_by_engine) if urls else None
    for got in (before or {}).values():
        if isinstance(got, str):  # not reconciled: said now, not only at the end
            printer.err.print(f"specterm: {got}; its replicas are not reconciled", markup=False, highlight=False)
    timer = threading.Timer(args.duration, fleet.stop) if args.duration else None
    if timer:
        timer.daemon = True
        timer.start()
    if not args.json:
        where = ", ".join(t.addr for t in targets)
        printer.err.print(f"specterm: attached to {where}; Ctrl+C stops", markup=False, highlight=False)
    rc = 0
    try:
        fleet.run()
    except KeyboardInterrupt:
        pass
    finally:
        if timer:
            timer.cancel()
        try:
            if before is not None:
                rc = _report_reconcile(printer, sink, fleet, before)
        finally:
            sink.close()
    if args.json:
        printer(SessionEnded(t=fleet.clock()))
    printer.finish()
    if sink.recorder is not None and not args.json:
        printer.err.print(f"specterm: recorded to {sink.recorder.path}", markup=False, highlight=False)
    return rc


def _report_reconcile(printer, sink, fleet, before: dict) -> int:
    """Each replica's totals against its own counter deltas over the attach (``Fleet.reconcile``). The
    API server records a step's counters when it handles that step's outputs, which can come a moment
    after the publisher sent the step: read a few times (2 s at most) before calling it a mismatch."""
    import time

    from specterm.session.metrics import spec_counters_by_engine

    for _ in range(8):
        results = fleet.reconcile(before, spec_counters_by_engine)
        if all(r.matched for r in results):
            break
        time.sleep(0.25)
    one = len(fleet.replicas) == 1
    for r in results:
        if one:  # one server: the line and the event read as they always did
            r = r.model_copy(update={"replica": None})
        sink(r)
        who = "" if one else f"{r.replica}: "
        line = (
            "verdicts reconcile with the server's /metrics"
            if r.matched
            else "verdicts do NOT reconcile with /metrics "
            "(requests already running when attach started or still running at its end count there too)"
        )
        since = f" ({r.detail})" if r.matched and r.detail else ""
        printer.err.print(f"specterm: {who}{line}{since}: ours {r.ours}, vllm {r.vllm}", markup=False, highlight=False)
    unread = any(isinstance(got, str) for got in before.values())  # asked for, not done: said at the start
    return 0 if all(r.matched for r in results) and not unread else 1
