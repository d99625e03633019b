"""``specterm attach [ADDR]``: watch a ``vllm serve`` that runs specterm's publishing scheduler.

Start the server with ``specterm vllm-serve MODEL [vLLM flags]`` (or add ``--scheduler-cls
specterm.engine.publish.PublishingScheduler`` to your own ``vllm serve`` command), then attach: every
request the server runs, from any client, appears with each token coloured by its verdict.

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
        nargs="?",
        metavar="ADDR",
        help=f"the server's publishing address: a socket path, ipc://PATH or tcp://HOST:PORT "
        f"(default: ${wire.ENV_ADDR}, else {wire.default_socket_path()})",
    )
    p.add_argument("--token", help=f"the server's token, for a tcp:// address (default: ${wire.ENV_TOKEN})")
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
        help="the server's Prometheus endpoint (e.g. http://127.0.0.1:8000/metrics): at the end, "
        "check the verdict counts against vLLM's spec-decode counters",
    )
    p.add_argument("--theme", help="dashboard theme")
    from specterm.cli.common import add_record_args

    add_record_args(p)
    p.set_defaults(func=handle)


def handle(args: argparse.Namespace) -> int:
    from specterm.errors import ConfigError
    from specterm.session.attach import check_address

    chosen = args.addr or os.environ.get(wire.ENV_ADDR) or None
    if wire.publishing_off(chosen):
        said = f"address {chosen!r}" if args.addr else f"{wire.ENV_ADDR}={chosen}"
        raise ConfigError(f"{said} means publishing is off: nothing to attach to; give the server's address")
    addr = wire.user_endpoint(chosen)
    token = args.token or os.environ.get(wire.ENV_TOKEN) or None
    if addr.startswith("tcp://") and not token:
        raise ConfigError(f"{addr} needs the server's token: --token or ${wire.ENV_TOKEN}")
    for name in ("max_requests", "duration"):
        value = getattr(args, name)
        if value is not None and value <= 0:
            raise ConfigError(f"--{name.replace('_', '-')} must be positive")
    hello = check_address(addr)  # the server's sidecar, read once: Attach starts from it
    if args.headless or args.json:
        return run_headless(args, addr, token, hello)
    return run_dashboard(args, addr, token, hello)


def make_recorder(args: argparse.Namespace):
    from specterm.cli.common import recorder_from_args

    return lambda header: recorder_from_args(args, header)


def run_dashboard(args: argparse.Namespace, addr: str, token: str | None, hello: wire.Hello | None = None) -> int:
    from specterm.ui.attach_app import make_attach_app

    app = make_attach_app(
        addr, token=token, tokenizer=args.tokenizer, make_recorder=make_recorder(args), theme=args.theme, hello=hello
    )
    try:
        app.run()
    finally:
        for sink in app.attach_sinks:
            sink.close()
            if sink.recorder is not None:
                print(f"specterm: recorded to {sink.recorder.path}")
    return 0


def run_headless(args: argparse.Namespace, addr: str, token: str | None, hello: wire.Hello | None = None) -> int:
    import threading

    from specterm.config import load_thresholds
    from specterm.diagnose import Diagnoser
    from specterm.events import SessionEnded
    from specterm.headless import RequestBlockPrinter
    from specterm.session.attach import Attach, RecordingSink, scrape_spec_counters

    printer = RequestBlockPrinter(json=args.json, show_rejected=args.show_rejected)
    sink = RecordingSink(printer, make_recorder(args), Diagnoser(load_thresholds()))
    attach = Attach(addr, sink, token=token, tokenizer=args.tokenizer, max_requests=args.max_requests, hello=hello)
    before = scrape_spec_counters(args.metrics) if args.metrics else None
    timer = threading.Timer(args.duration, attach.stop) if args.duration else None
    if timer:
        timer.daemon = True
        timer.start()
    if not args.json:
        printer.err.print(f"specterm: attached to {addr}; Ctrl+C stops", markup=False, highlight=False)
    rc = 0
    try:
        attach.run()
    except KeyboardInterrupt:
        pass
    finally:
        if timer:
            timer.cancel()
        try:
            if before is not None:
                rc = _report_reconcile(printer, sink, attach, before, args.metrics)
        finally:
            sink.close()
    if args.json:
        printer(SessionEnded(t=attach.clock()))
    printer.finish()
    if sink.recorder is not None and not args.json:
        printer.err.print(f"specterm: recorded to {sink.recorder.path}", markup=False, highlight=False)
    return rc


def _report_reconcile(printer, sink, attach, before: dict, url: str) -> int:
    """Our totals against the server's counter deltas over the attach. The API server records a step's
    counters when it handles that step's outputs, which can come a moment after the publisher sent the
    step: read a few times (2 s at most) before calling it a mismatch."""
    import time

    from specterm.events import EngineCounters
    from specterm.session.attach import scrape_spec_counters

    ours = attach.totals()
    for _ in range(8):
        after = scrape_spec_counters(url)
        theirs = {k: after[k] - before[k] for k in ours}
        if theirs == ours:
            break
        time.sleep(0.25)
    ok = ours == theirs
    sink(
        EngineCounters(
            t=attach.clock(),
            request_id="all",
            ours=ours,
            vllm=theirs,
            matched=ok,
            detail="" if ok else "requests that ran before or after the attach count there too",
        )
    )
    line = (
        "verdicts reconcile with the server's /metrics"
        if ok
        else "verdicts do NOT reconcile with /metrics "
        "(requests already running when attach started or still running at its end count there too)"
    )
    printer.err.print(f"specterm: {line}: ours {ours}, vllm {theirs}", markup=False, highlight=False)
    return 0 if ok else 1
