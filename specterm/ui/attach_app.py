"""``specterm attach`` with the dashboard: the app in ``attach`` mode on a ``Fleet`` source (one
server is a fleet of one)."""

from __future__ import annotations

from typing import Any

from specterm.ui.app import AppOptions, SpecTermApp


def make_attach_app(
    targets: str | list[Any],
    *,
    tokenizer: str | None = None,
    make_recorder: Any = None,
    hellos: dict[str, Any] | None = None,
    notes: list[str] | None = None,
    **kwargs: Any,
) -> SpecTermApp:
    """The dashboard on publishing servers: ``targets`` (``session.fleet.Target``s, or one address);
    ``make_recorder(header)`` (optional) records the session once a server has said what it serves;
    ``hellos``: sidecars as ``check_address`` read them, by address; ``notes``: lines to show first
    (an address not up yet); ``kwargs``: ``AppOptions``' fields."""
    from specterm.session.fleet import Fleet, Target
    from specterm.session.recording_sink import RecordingSink

    if isinstance(targets, str):
        targets = [Target(targets)]
    sinks: list[RecordingSink] = []

    def source(push):
        sink = RecordingSink(push, make_recorder or (lambda _h: None))
        sinks.append(sink)
        return Fleet(targets, sink, tokenizer=tokenizer, hellos=hellos, notes=notes)

    # a local server's GPU is this machine's
    kwargs.setdefault("gpu", all(t.addr.startswith("ipc://") for t in targets))
    app = SpecTermApp(mode="attach", attach=source, options=AppOptions(**kwargs))
    app.attach_sinks = sinks  # closed by the caller when the app exits (cli/attach.py)
    return app
