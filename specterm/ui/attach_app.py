"""``specterm attach`` with the dashboard: the app in ``attach`` mode on an ``Attach`` source."""

from __future__ import annotations

from typing import Any

from specterm.ui.app import AppOptions, SpecTermApp


def make_attach_app(
    addr: str,
    *,
    token: str | None = None,
    tokenizer: str | None = None,
    make_recorder: Any = None,
    hello: Any = None,
    **kwargs: Any,
) -> SpecTermApp:
    """The dashboard on a publishing server at ``addr``; ``make_recorder(header)`` (optional) records
    the session once the server has said what it serves; ``hello``: the server's sidecar as
    ``check_address`` read it; ``kwargs``: ``AppOptions``' fields."""
    from specterm.session.attach import Attach, RecordingSink

    sinks: list[RecordingSink] = []

    def source(push):
        sink = RecordingSink(push, make_recorder or (lambda _h: None))
        sinks.append(sink)
        return Attach(addr, sink, token=token, tokenizer=tokenizer, hello=hello)

    kwargs.setdefault("gpu", addr.startswith("ipc://"))  # a local server's GPU is this machine's
    app = SpecTermApp(mode="attach", attach=source, options=AppOptions(**kwargs))
    app.attach_sinks = sinks  # closed by the caller when the app exits (cli/attach.py)
    return app
