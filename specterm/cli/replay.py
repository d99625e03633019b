"""``specterm replay FILE``: play a recorded session back — in the dashboard, headless, or as a summary.

* default: the dashboard (``specterm.ui.app.run_replay_app``) at ``--speed`` (default 1.0); when
  the dashboard is not available or standard output is not a terminal, headless with a one-line note.
* ``--headless``: the verdict-styled token stream ``specterm run`` prints, as fast as possible
  unless ``--speed`` is given. With ``--json``: the events as JSONL (header first, so the output is
  itself a replayable session).
* ``--summary``: per-request and whole-session figures (``specterm.stats.summarize``) as tables;
  with ``--json``, as one JSON object.
* ``--report FILE.html``: one self-contained HTML page to share (``specterm.session.report``).

Every mode runs the detectors (``specterm.diagnose``, thresholds from the config file's
``[diagnose]`` table) on the events, a session recorded before they existed included: headless
prints each finding where it occurs, ``--summary`` counts them by kind and lists them.

Reader warnings go to standard error, one line each; an unreadable file is one ``specterm: error:``
line and a non-zero exit.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import sys
from collections.abc import Iterator
from typing import Any

from specterm.errors import SpectermError
from specterm.render import inert


def _speed(text: str) -> float:
    """``--speed`` values: a positive number; ``0``, ``inf`` or ``max`` for as fast as possible."""
    if text.strip().lower() in ("max", "inf", "infinity", "0"):
        return math.inf
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not value > 0:  # also refuses NaN
        raise argparse.ArgumentTypeError(f"must be positive, or 0/inf/max for as fast as possible: {text!r}")
    return value


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "replay",
        help="replay a recorded session (dashboard, headless or summary)",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("file", metavar="FILE", help="a session file (.jsonl, or gzip-compressed)")
    p.add_argument("--headless", action="store_true", help="print the token stream instead of opening the dashboard")
    p.add_argument(
        "--speed",
        type=_speed,
        default=None,
        metavar="X",
        help="replay speed factor: 2 = twice as fast; 0, inf or max = as fast as possible "
        "(default: 1 in the dashboard, as fast as possible headless)",
    )
    p.add_argument("--summary", action="store_true", help="print per-request and session figures, no replay")
    p.add_argument(
        "--json", action="store_true", help="with --summary: the summary as JSON; with --headless: the events as JSONL"
    )
    p.add_argument("--show-rejected", action="store_true", help="headless: show rejected drafts, struck through")
    p.add_argument("--report", metavar="HTML", help="write a self-contained HTML report (transcript, findings, plots)")
    p.set_defaults(func=handle)


def _warn(line: str) -> None:
    print(f"specterm: warning: {inert(line)}", file=sys.stderr)


def _note(line: str) -> None:
    print(f"specterm: note: {inert(line)}", file=sys.stderr)


def handle(args: argparse.Namespace) -> int:
    from specterm.config import load_thresholds
    from specterm.session.reader import read_session

    thresholds = load_thresholds()  # a bad [diagnose] value: one line, before anything is read

    if args.report:  # the page, nothing else: the session is read, never written
        from specterm.session.report import report_command

        return report_command(args.file, args.report, thresholds, _warn)
    if args.json and not (args.summary or args.headless):
        args.headless = True  # JSONL events only make sense headless
    note = None
    if not (args.summary or args.headless):
        if not sys.stdout.isatty():
            note = "standard output is not a terminal; replaying headless"
        else:
            try:
                from specterm.ui.app import run_replay_app  # Textual: imported only when needed
            except ImportError as err:
                note = f"the dashboard is not available ({err}); replaying headless"
            else:
                if is_compare_file(args.file):  # a `specterm compare` recording: the split view
                    from specterm.ui.compare_app import run_compare_replay

                    data = read_session(args.file, freeze_gc=True)
                    for warning in data.warnings:
                        _warn(warning)
                    return run_compare_replay(data, speed=1.0 if args.speed is None else args.speed)
                # The dashboard reads the file itself: the header and first events before its first
                # frame, the rest on a worker while it plays (its warnings appear when it is read).
                speed = 1.0 if args.speed is None else args.speed
                return int(run_replay_app(args.file, speed=speed, thresholds=thresholds) or 0)
    if args.summary and is_compare_file(args.file):  # per side, not the two sides merged
        from specterm.cli.compare import print_report

        data = read_session(args.file)
        for warning in data.warnings:
            _warn(warning)
        with _writing_output():
            return print_report(data.header, data.events, as_json=args.json, transcripts=False)
    if args.summary:
        from specterm.session.fast_summary import summarize_file

        data, summary = summarize_file(args.file, thresholds=thresholds)  # counted as read: no event objects kept
        for warning in data.warnings:
            _warn(warning)
        with _writing_output():
            return print_summary(data, as_json=args.json, summary=summary)
    # The events live until the process exits: let the GC stop rescanning them (see read_session).
    data = read_session(args.file, freeze_gc=True)
    for warning in data.warnings:
        _warn(warning)
    if note:
        _note(note)
    if not args.json and is_compare_file(data.header):
        from specterm.cli.compare import print_report

        with _writing_output():
            return print_report(data.header, data.events)
    return replay_headless(
        data,
        speed=math.inf if args.speed is None else args.speed,
        as_json=args.json,
        show_rejected=args.show_rejected,
        thresholds=thresholds,
    )


def is_compare_file(source: Any) -> bool:
    """A ``specterm compare`` recording (``source``: its header, or a path whose header is read)."""
    from specterm.bench.compare_tally import is_compare
    from specterm.session.reader import SessionReader

    if isinstance(source, (str, os.PathLike)):
        try:
            with SessionReader(source) as reader:
                source = reader.data.header
        except (SpectermError, OSError):
            return False  # the ordinary path reads it again and says what is wrong, in one line
    return is_compare(source)


def replay_headless(
    data: Any, *, speed: float, as_json: bool = False, show_rejected: bool = False, thresholds: Any = None
) -> int:
    """Drive the headless printer from a ``Replayer`` — the same event path the dashboard uses,
    detectors included (``specterm.diagnose``: the findings are printed where they occur)."""
    from specterm.diagnose import Diagnoser, diagnosing
    from specterm.headless import HeadlessPrinter, RequestBlockPrinter
    from specterm.session.replay import Replayer

    # An attached server's session interleaves many requests: printed a block per request, as attach does.
    kind = RequestBlockPrinter if "attach" in (data.header.config or {}) else HeadlessPrinter
    printer = kind(json=as_json, show_rejected=show_rejected)
    with _writing_output():
        if as_json:
            printer(data.header)
        replayer = Replayer(data.events, diagnosing(printer, Diagnoser(thresholds)), speed=speed)
        replayer.start()
        try:
            while not replayer.wait_idle(0.25):  # short waits keep Ctrl+C responsive
                pass
        except KeyboardInterrupt:
            replayer.stop()
            raise
        if replayer.error is not None:
            raise replayer.error  # the sink's error, raised on its thread
        printer.finish()
    return 0


@contextlib.contextmanager
def _writing_output() -> Iterator[None]:
    """Output failures as one line, not a traceback. A closed pipe (``… | head``) exits 1 quietly,
    as Rich does for what it prints (it raises ``SystemExit(1)`` itself)."""
    try:
        yield
    except BrokenPipeError:
        # Point stdout at devnull so the interpreter's final flush does not fail again.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        raise SystemExit(1) from None
    except OSError as err:  # e.g. ENOSPC: standard output is a full disk
        raise SpectermError(f"cannot write the output: {err.strerror or err}") from None


# -- --summary --------------------------------------------------------------------------------------


def _percentile(sorted_values: list[float], q: float) -> float | None:
    """Nearest-rank percentile of already sorted values (``None`` when empty)."""
    if not sorted_values:
        return None
    rank = max(1, math.ceil(q / 100 * len(sorted_values)))
    return sorted_values[rank - 1]


def _distribution(values: list[float]) -> dict[str, Any]:
    finite = sorted(v for v in values if math.isfinite(v))
    return {
        "count": len(finite),
        "mean": sum(finite) / len(finite) if finite else None,
        "p50": _percentile(finite, 50),
        "p95": _percentile(finite, 95),
        "max": finite[-1] if finite else None,
    }


def _json_safe(value: Any) -> Any:
    """NaN/inf (possible in a damaged file) are not JSON: they become null."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_safe(v) for v in value]
    return value


def summary_dict(data: Any, summary: Any = None) -> dict[str, Any]:
    """``summarize(events).as_dict()`` (or ``summary``'s, already counted) plus the file's identity
    and latency/TTFT distributions."""
    from specterm.stats import summarize

    summary = summary if summary is not None else summarize(data.events)
    ttfts = [r.ttft_s for r in summary.requests.values() if r.ttft_s is not None]
    return _json_safe(
        {
            "file": str(data.path),
            "format_version": data.format_version,
            "specterm_version": data.header.specterm_version,
            "models": data.header.models,
            "agent": data.header.agent,
            "warnings": data.warnings,
            "skipped_unknown": data.skipped_unknown,
            **summary.as_dict(),
            "step_latency_s": _distribution(summary.step_wall_s),
            "ttft_s": _distribution(ttfts),
        }
    )


def print_summary(data: Any, *, as_json: bool = False, summary: Any = None) -> int:
    from specterm.stats import summarize

    summary = summary if summary is not None else summarize(data.events)
    figures = summary_dict(data, summary)
    if as_json:
        sys.stdout.write(json.dumps(figures, indent=2) + "\n")
        return 0
    from rich.console import Console
    from rich.text import Text

    console = Console(highlight=False, soft_wrap=False)
    console.print(_session_table(figures, summary.session))
    if figures["requests"]:
        for table in _requests_tables(figures["requests"]):
            console.print(table)
    from specterm.headless import finding_text

    for line in summary.session.where.correction_lines():  # where the corrections cluster
        console.print(Text(inert(line)))
    for finding in summary.findings:
        console.print(finding_text(finding))
    return 0


def _num(value: float | None, spec: str = ".2f", scale: float = 1.0) -> str:
    return "–" if value is None else format(value * scale, spec)


def _session_table(f: dict[str, Any], stats: Any) -> Any:
    """``f`` is what ``--json`` prints; ``stats`` the session's ``SpecStats``, for the figures it
    derives that the JSON does not carry."""
    from rich.table import Table
    from rich.text import Text

    s = f["session"]
    table = Table(title=Text(f"session {inert(f['file'])}"), show_header=False, title_justify="left")
    table.add_column(style="bold")
    table.add_column()
    models = f["models"] or {}

    def row(name: str, value: str) -> None:
        # Text, not str: a str cell is parsed as Rich markup, and these values come from the file.
        table.add_row(name, Text(inert(value)))

    row("models", " → ".join(str(models.get(k)) for k in ("draft", "target") if models.get(k)) or "–")
    row("method", f"{models.get('method', '–')}, k = {models.get('num_speculative_tokens', '–')}")
    row("format", f"{f['format_version']} (specterm {f['specterm_version'] or '?'})")
    total = s["tokens"] or 1
    row(
        "tokens",
        f"{s['tokens']}:  "
        + "  ".join(f"{verdict} {count} ({100 * count / total:.1f}%)" for verdict, count in s["by_verdict"].items()),
    )
    row("forced / rejected", f"{s['forced']} forced, {s['rejected']} rejected drafts")
    row("engine steps", f"{s['steps']} ({s['drafts']} with drafts, {s['draft_tokens']} draft tokens)")
    row("acceptance rate", _num(s["acceptance_rate"], ".1%"))
    if f.get("answers"):
        withheld = f.get("withheld_answers", 0)
        row(
            "agent answers",
            f"{f['answers']}, {f['ungrounded_answers']} ungrounded (a figure or date no tool "
            "result contains)"
            + (f", {withheld} withheld (the model's invented figure replaced by what failed)" if withheld else ""),
        )
    row("mean acceptance length", _num(s["mean_acceptance_length"]))
    if s.get("grammar_drafts"):  # grammar drafting: docs/grammar-drafting.md
        row(
            "grammar drafting",
            f"{s['grammar_drafts']} of {s['draft_tokens']} draft tokens from the grammar, "
            f"{s['grammar_accepted']} accepted; {s['draft_passes']} draft passes "
            f"({_num(stats.draft_passes_per_token)} per token)",
        )
    if line := stats.k_line():  # recorded batch sizes: what a k-per-batch-size schedule did
        row("steps per k @ batch size", line)
    row("per-position acceptance", "  ".join(f"{i}: {p:.2f}" for i, p in enumerate(s["per_position"], 1)) or "–")
    row(
        "conditional per position",
        "  ".join(f"{i}: {_num(p)}" for i, p in enumerate(s["conditional_per_position"], 1)) or "–",
    )
    if line := stats.where.region_line():  # requests under a JSON schema: acceptance by region
        row("acceptance by region", line)
    lat, ttft = f["step_latency_s"], f["ttft_s"]
    row(
        "step latency (ms)",
        f"mean {_num(lat['mean'], '.1f', 1e3)}  p50 {_num(lat['p50'], '.1f', 1e3)}  "
        f"p95 {_num(lat['p95'], '.1f', 1e3)}  max {_num(lat['max'], '.1f', 1e3)}",
    )
    row(
        "TTFT (ms)",
        f"mean {_num(ttft['mean'], '.1f', 1e3)}  max {_num(ttft['max'], '.1f', 1e3)} over {ttft['count']} requests",
    )
    if replicas := f.get("replicas"):  # a fleet's recording: each scheduler side by side
        row(
            "replicas",
            "\n".join(
                f"{name}: {r['requests']} requests, acceptance {_num(r['acceptance_rate'], '.1%')}, "
                f"mean length {_num(r['mean_acceptance_length'])}, {r['tokens']} tokens"
                for name, r in replicas.items()
            ),
        )
    by_kind = f.get("findings_by_kind") or {}
    row("findings", ", ".join(f"{kind} {n}" for kind, n in by_kind.items()) or "none")
    if f["skipped_unknown"]:
        row("skipped", f"{f['skipped_unknown']} events of unknown type")
    return table


def _requests_tables(requests: list[dict[str, Any]]) -> list[Any]:
    """Two tables (verdicts, timing) rather than one, so each fits an 80-column terminal."""
    from rich.table import Table
    from rich.text import Text

    def table(title: str, headers: tuple[str, ...], rows: list[list[Any]], caption: str | None = None) -> Table:
        out = Table(title=title, title_justify="left", caption=caption, caption_justify="left")
        for header in headers:
            left = header in ("request", "finish")
            out.add_column(header, justify="left" if left else "right", overflow="fold")
        for cells in rows:
            # Text, not str: request ids and finish reasons come from the file and must not be markup.
            out.add_row(*(Text(inert(str(c))) for c in cells))
        return out

    verdicts = [
        [
            r["request_id"],
            r["tokens"],
            *r["by_verdict"].values(),
            r["rejected"],
            _num(r["acceptance_rate"], ".1%"),
            _num(r["mean_acceptance_length"]),
        ]
        for r in requests
    ]
    timing = [
        [
            r["request_id"],
            _num(r["ttft_s"], ".1f", 1e3),
            _num(r["wall_s"]),
            _num(r["tokens_per_s"], ".1f"),
            ("cancelled" if r["cancelled"] else r["finish_reason"]) or "–",
        ]
        for r in requests
    ]
    return [
        table(
            "requests: tokens by verdict",
            ("request", "tokens", "acc", "corr", "bonus", "tgt", "rej", "rate", "MAL"),
            verdicts,
            "acc accepted, corr correction, tgt target, rej rejected drafts, rate acceptance rate, "
            "MAL mean acceptance length",
        ),
        table("requests: timing", ("request", "TTFT ms", "wall s", "tok/s", "finish"), timing),
    ]
