"""``specterm attach`` with the dashboard: the app in ``attach`` mode on an ``Attach`` source."""

from __future__ import annotations

import argparse
from typing import Any

from specterm.ui.app import SpecTermApp


def make_attach_app(addr: str, *, token: str | None = None, tokenizer: str | None = None,
                    make_recorder: Any = None, **kwargs: Any) -> SpecTermApp:
    """The dashboard on a publishing server at ``addr``; ``make_recorder(header)`` (optional) records
    the session once the server has said what it serves. Tests pass ``gpu``/``deterministic`` etc."""
    from specterm.session.attach import Attach, RecordingSink

    sinks: list[RecordingSink] = []

    def source(push):
        sink = RecordingSink(push, make_recorder or (lambda _h: None))
        sinks.append(sink)
        return Attach(addr, sink, token=token, tokenizer=tokenizer)

    kwargs.setdefault("gpu", addr.startswith("ipc://"))  # a local server's GPU is this machine's
    app = SpecTermApp(mode="attach", attach=source, **kwargs)
    app.attach_sinks = sinks  # closed by run_attach_app when the app exits
    return app


def run_attach_app(args: argparse.Namespace, addr: str, token: str | None) -> int:
    from specterm.cli.attach import make_recorder

    app = make_attach_app(addr, token=token, tokenizer=args.tokenizer, make_recorder=make_recorder(args),
                          theme=args.theme)
    try:
        app.run()
    finally:
        for sink in app.attach_sinks:
            sink.close()
            if sink.recorder is not None:
                print(f"specterm: recorded to {sink.recorder.path}")
    return 0
