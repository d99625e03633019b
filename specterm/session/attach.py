"""``specterm attach``: a publishing ``vllm serve``'s stream (``engine/wire.py``) as specterm events.

One ``StepAssembler`` per request turns each ``wire.Rec`` into a ``spec_step``: the same verdict rule
and detokenisation as the in-process engine (``engine/verdicts.py``). Around it:

* ``request_started`` when the server first shows a request to this viewer (a late attach sees a
  running request from its next step on, ``params.joined_late``), with the *conversation* it continues;
* ``request_finished`` with the server's own times: TTFT and wall from vLLM's ``arrival_time``, and the
  prompt tokens its prefix cache served;
* ``error`` warnings for what a viewer must say: speculation off on this server, batches the
  publisher dropped, the server gone (its open requests end as ``server stopped``, keeping what came)
  and back (ZeroMQ reconnects by itself; a new server process is named as a restart).

Conversations: each request is placed in the client conversation it continues
(``session/conversations.py``), across every replica of a fleet.

Threading: ``Attach.run`` (or the ``Fleet`` that drives it: ``connect`` / ``on_ready`` / ``close``) is
the only reader of the socket and calls ``sink`` from its own thread; ``stop()`` may come from any thread.
"""

from __future__ import annotations

import os
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from specterm import __version__
from specterm.engine import wire
from specterm.engine.base import SessionClock
from specterm.engine.verdicts import StepAssembler, StepRecord, vllm_totals
from specterm.errors import ConfigError
from specterm.events import (
    Error,
    ReplicaSeen,
    RequestFinished,
    RequestStarted,
    SessionStarted,
    Sink,
    Speculation,
)
from specterm.paths import portable
from specterm.session.conversations import Conversations

START_HINT = (
    "start the server with specterm's publishing scheduler: specterm vllm-serve MODEL "
    "[vLLM flags], or add --scheduler-cls " + wire.SCHEDULER_CLS + " to your vllm serve command"
)


class AttachError(ConfigError):
    pass


def check_address(addr: str) -> wire.Hello | None:
    """One line before attaching: nothing there, a socket of another user's, another wire version.
    Returns the server's hello from its sidecar (``None`` over TCP or without one), for ``Attach``."""
    if addr.startswith("tcp://"):
        host, port = wire.split_tcp(addr)
        if not wire.tcp_listener(host, port):
            raise AttachError(
                f"nothing is listening at {addr}; {START_HINT} and {wire.ENV_ADDR}={addr} {wire.ENV_TOKEN}=..."
            )
        return None
    path = Path(addr.removeprefix("ipc://"))
    if not path.exists():
        raise AttachError(f"no server publishes at {path}; {START_HINT}")
    for p in (path, path.parent):
        if p.stat().st_uid != os.getuid():
            raise AttachError(f"{p} belongs to another user (uid {p.stat().st_uid}); refusing to read their prompts")
    if not wire.unix_listener(path):
        raise AttachError(f"the server that published at {path} is gone (nothing accepts connections); {START_HINT}")
    return read_sidecar(path)


def read_sidecar(path: Path) -> wire.Hello | None:
    try:
        data = wire.sidecar(path).read_bytes()
    except OSError:
        return None
    try:
        hello = wire.msgspec.json.decode(data, type=wire.Hello)
    except wire.msgspec.ValidationError:
        hello = None
    version = hello.version if hello else wire.msgspec.json.decode(data).get("version")
    if version != wire.WIRE_VERSION:
        raise _version_mismatch(path, version)
    return hello


def _version_mismatch(server: object, version: object) -> AttachError:
    """What a viewer says of a server on another wire version, whether its sidecar (before
    connecting) or its first message (a server started later) tells."""
    return AttachError(
        f"the server at {server} publishes event version {version}; this specterm reads "
        f"version {wire.WIRE_VERSION}: use the same specterm on both sides"
    )


@dataclass
class _Request:
    assembler: StepAssembler
    arrival: float
    ttft: float | None = None
    cached: int | None = None
    ids: list[int] = field(default_factory=list)
    shown_id: str = ""
    """The id its events carry: the server's, unless another replica of the fleet already used it."""


class Attach:
    """Subscribes to ``addr`` and emits events to ``sink`` until ``stop()`` (or ``max_requests`` finished)."""

    def __init__(
        self,
        addr: str,
        sink: Sink,
        *,
        token: str | None = None,
        tokenizer: str | None = None,
        clock: Callable[[], float] | None = None,
        max_requests: int | None = None,
        hello: wire.Hello | None = None,
        replica: str | None = None,
        conversations: Conversations | None = None,
        shown_ids: set[str] | None = None,
        claim: Callable[[Attach, wire.Hello], bool] | None = None,
        tokenizers: dict[str, Any] | None = None,
    ) -> None:
        """``replica``, ``conversations``, ``shown_ids``, ``claim`` and ``tokenizers`` are the fleet's
        (``Fleet``): this scheduler's label on its requests, the conversations every replica shares,
        the request ids shown so far (a repeated one is shown as ``ID@REPLICA``), the check that a
        hello is not a publisher another address already follows (``False``: stop reading), and the
        tokenizers loaded so far by path (eight ranks of one model load it once)."""
        self.addr = addr
        self.replica = replica
        self.conversations = conversations if conversations is not None else Conversations()
        self._shown_ids = shown_ids if shown_ids is not None else set()
        self._claim = claim
        self._tokenizers = tokenizers if tokenizers is not None else {}
        self.base: dict[str, int] | None = None
        """``totals()`` when the server last restarted (its counters start again from 0); None: no restart."""
        self._sidecar = hello
        """The server's sidecar hello as ``check_address`` read it; without one ``run`` reads it."""
        self.token = token
        self.sink = sink
        self.clock = clock or SessionClock()
        self.tokenizer_path = tokenizer
        self.max_requests = max_requests
        self.finished = 0
        self.hello: wire.Hello | None = None
        self.dropped = 0
        self.requests: dict[str, _Request] = {}
        self.assemblers: list[StepAssembler] = []
        """Every request's assembler, finished ones too (their stats: totals and reconciliation)."""
        self._tok: Any = None
        self._stop = threading.Event()
        self._fresh = True
        """No batch yet since (re)connecting: the next one sets the baseline of ``dropped``."""
        self._connected = False

    def stop(self) -> None:
        self._stop.set()

    @property
    def stopped(self) -> bool:
        return self._stop.is_set()

    # -- the socket loop ----------------------------------------------------------------------------

    def run(self) -> None:
        import zmq

        poller = zmq.Poller()
        for sock in self.connect():
            poller.register(sock, zmq.POLLIN)
        try:
            while not self._stop.is_set():
                for sock in dict(poller.poll(100)):
                    self.on_ready(sock)
                if self.max_requests is not None and self.finished >= self.max_requests:
                    break
        finally:
            self.close()

    def connect(self) -> list[Any]:
        """Subscribe (the server's sidecar hello first, when there is one); returns the sockets to poll
        for ``on_ready``: the subscription and its connection monitor."""
        import zmq

        if not self.addr.startswith("tcp://"):
            hello = self._sidecar or read_sidecar(Path(self.addr.removeprefix("ipc://")))
            if hello is not None:
                self._on_hello(hello)
                if not self._stop.is_set():
                    self.tokenizer()  # seconds (transformers): before the first request, not during it
        ctx = zmq.Context.instance()
        sock = ctx.socket(zmq.SUB)
        sock.setsockopt(zmq.LINGER, 0)
        sock.setsockopt(zmq.RCVHWM, 0)  # the publisher bounds the queue; here we take all it sends
        sock.setsockopt(zmq.RECONNECT_IVL, 200)
        sock.setsockopt(zmq.RECONNECT_IVL_MAX, 2000)
        sock.setsockopt(zmq.SUBSCRIBE, wire.topic_for(self.addr, self.token))
        # its own monitor name (pyzmq's default is per fd, which a later socket may reuse: publish.py)
        monitor = sock.get_monitor_socket(
            zmq.EVENT_CONNECTED | zmq.EVENT_DISCONNECTED, addr=f"inproc://specterm-attach-monitor-{uuid.uuid4().hex}"
        )
        sock.connect(self.addr)
        self._sock, self._monitor = sock, monitor
        return [sock, monitor]

    def on_ready(self, sock: Any) -> None:
        """One message from a socket ``connect`` returned, ready to read."""
        import zmq
        from zmq.utils.monitor import parse_monitor_message

        if sock is self._monitor:
            event = parse_monitor_message(sock.recv_multipart())["event"]
            self._on_connection(event == zmq.EVENT_CONNECTED)
        elif not self._stop.is_set():
            _topic, payload = sock.recv_multipart()
            self.handle(payload)

    def close(self) -> None:
        sock, self._sock = getattr(self, "_sock", None), None
        if sock is not None:
            sock.disable_monitor()
            self._monitor.close(linger=0)
            sock.close(linger=0)

    def _warn(self, message: str, request_id: str | None = None) -> None:
        self.sink(Error(t=self.clock(), level="warning", where="attach", message=message, request_id=request_id))

    def _on_connection(self, up: bool) -> None:
        if up == self._connected:
            return
        self._connected = up
        if up:
            self._fresh = True
            tcp = (
                " (over TCP only with the server's token: with another one nothing arrives)"
                if self.addr.startswith("tcp://")
                else ""
            )
            self._warn(f"connected to {self.addr}; requests appear as the server runs them{tcp}")
        else:
            self._server_gone(f"lost the server at {self.addr}; reconnecting by itself")

    def _server_gone(self, message: str) -> None:
        self._warn(message)
        for rid in list(self.requests):
            self._finish(rid, "server stopped", None, time.time())

    # -- messages -----------------------------------------------------------------------------------

    def handle(self, payload: bytes) -> None:
        try:
            msg = wire.decode(payload)
        except wire.VersionMismatch as err:
            raise _version_mismatch(self.addr, err) from None
        except (wire.msgspec.DecodeError, wire.msgspec.ValidationError) as err:  # garbage: say so, go on
            self._warn(f"skipped a message this specterm cannot read ({err})")
            return
        if isinstance(msg, wire.Hello):
            self._on_hello(msg)
        elif isinstance(msg, wire.Batch):
            self._on_batch(msg)
        elif isinstance(msg, wire.Bye):
            self._connected = False  # the disconnect that follows says nothing new
            self._server_gone(f"the server stopped ({msg.reason}); waiting for it to come back")

    def _on_hello(self, hello: wire.Hello) -> None:
        if self._claim is not None and not self._claim(self, hello):
            self.stop()  # another address of the fleet follows this publisher already
            return
        old, self.hello = self.hello, hello
        if self.replica is not None and (old is None or old.pid != hello.pid):
            self.sink(
                ReplicaSeen(
                    t=self.clock(),
                    replica=self.replica,
                    addr=self.addr,
                    model=portable(hello.model),
                    speculation=Speculation.model_validate(hello.spec).model_dump() if hello.spec else None,
                    pid=hello.pid,
                    dp_index=hello.dp_index,
                    weight_bytes=hello.weight_bytes,
                    restarted=old is not None,
                )
            )
        if old is None:
            models = {"target": portable(hello.model), "backend": f"vllm {hello.vllm} (vllm serve, pid {hello.pid})"}
            if hello.spec:
                models |= Speculation.model_validate(hello.spec).model_dump()
            if hello.weight_bytes:  # the bandwidth panel's weights per token, as in chat
                models["weight_bytes"] = hello.weight_bytes
            self.sink(
                SessionStarted(
                    t=self.clock(),
                    models=models,
                    config={"attach": self.addr},
                    specterm_version=__version__,
                    host=os.uname().nodename,
                )
            )
            if not hello.spec:
                self._warn("speculation is off on this server: every token is a target token")
        elif old.pid != hello.pid:
            self._warn(f"the server restarted (pid {old.pid} → {hello.pid}, {hello.model})")
            self.base = self.totals()  # its /metrics counters start again from 0
        if old is None or old.tokenizer != hello.tokenizer:
            self._tok = None

    def tokenizer(self) -> Any:
        if self._tok is None:
            from transformers import AutoTokenizer

            path = self.tokenizer_path or (self.hello.tokenizer if self.hello else None)
            if path is None:
                raise AttachError("the server has not said which tokenizer it serves; pass --tokenizer")
            try:
                self._tok = self._tokenizers.get(path) or AutoTokenizer.from_pretrained(path)
                self._tokenizers[path] = self._tok
            except Exception as err:  # noqa: BLE001 - transformers raises many types
                raise AttachError(
                    f"cannot load the served model's tokenizer {path!r} here ({type(err).__name__}); "
                    "pass --tokenizer PATH with a copy of it"
                ) from None
        return self._tok

    def _on_batch(self, b: wire.Batch) -> None:
        if self._fresh:
            # ``dropped`` is the publisher's running total: what it dropped before this viewer was
            # connected was not this viewer's, and the first batch a new subscriber gets was queued
            # before anything could be dropped for it
            self._fresh, self.dropped = False, b.dropped
        if b.dropped > self.dropped:
            self._warn(
                f"{b.dropped - self.dropped} engine steps dropped by the server (this viewer fell "
                f"behind): {b.dropped} in all"
            )
            self.dropped = b.dropped
        for o in b.opened:
            if o.id not in self.requests:
                self._open(o)
        for r in b.recs:
            req = self.requests.get(r.id)
            if req is None:
                continue  # opened before this viewer came, and not re-announced: nothing to decode with
            if req.ttft is None and r.emitted:
                req.ttft = max(b.t - req.arrival, 0.0)
            record = StepRecord(
                r.id,
                tuple(r.drafted),
                tuple(r.sampled),
                r.invalid,
                None if r.allowed is None else tuple(r.allowed),
                padding=r.padding,
                batch_size=b.batch_size,
            )
            req.assembler.add(list(r.emitted), record, b.wall)
            req.ids.extend(r.emitted)
        for d in b.done:
            self._finish(d.id, d.reason, d.cached, b.t)

    def _open(self, o: wire.ReqOpen) -> None:
        shown = o.id if o.id not in self._shown_ids else f"{o.id}@{self.replica}"
        self._shown_ids.add(shown)
        conv, turn = self.conversations.place(o.prompt)
        params: dict[str, Any] = {"max_tokens": o.max_tokens, "temperature": o.temperature, "json_schema": o.structured}
        if o.output:
            params["joined_late"] = True
        self.sink(
            RequestStarted(
                t=self.clock(),
                request_id=shown,
                prompt_tokens=len(o.prompt),
                params=params,
                conversation=conv,
                turn=turn,
                replica=self.replica,
            )
        )
        assembler = StepAssembler(shown, self.tokenizer(), [*o.prompt, *o.output], self.clock, self.sink)
        self.assemblers.append(assembler)
        self.requests[o.id] = _Request(
            assembler, o.arrival, ttft=None if not o.output else 0.0, cached=o.cached, shown_id=shown
        )

    def _finish(self, rid: str, reason: str | None, cached: int | None, t: float) -> None:
        req = self.requests.pop(rid, None)
        if req is None:
            return
        text = self.tokenizer().decode(req.ids, skip_special_tokens=True) if req.ids else ""
        self.sink(
            RequestFinished(
                t=self.clock(),
                request_id=req.shown_id,
                finish_reason=reason,
                text=text,
                output_tokens=req.assembler.stats.tokens,
                ttft_s=req.ttft,
                wall_s=max(t - req.arrival, 0.0),
                cancelled=reason in ("abort", "server stopped"),
                cached_tokens=cached if cached is not None else req.cached,
            )
        )
        self.finished += 1

    # -- totals -------------------------------------------------------------------------------------

    def totals(self) -> dict[str, int]:
        """Drafts, draft tokens and accepted over every request seen, counted as vLLM's spec-decode
        counters count them (``verdicts.vllm_totals``): comparable with ``/metrics``."""
        return vllm_totals(self.assemblers)

    def totals_since_restart(self) -> dict[str, int]:
        """``totals()`` since the server last restarted (all of them without a restart): what its
        ``/metrics`` counted, as they start from 0 with the new process."""
        now = self.totals()
        return now if self.base is None else {k: v - self.base.get(k, 0) for k, v in now.items()}
