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

Conversations: an agent on the client side sends request after request, each prompt the previous one
plus its answer and a tool result. A request whose prompt starts with an earlier request's whole
prompt continues that request's conversation (the longest such prefix wins); anything else starts one.

Threading: ``Attach.run`` is the only reader of the socket and calls ``sink`` from its own thread;
``stop()`` may come from any thread.
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
from specterm.events import BaseEvent, Error, RequestFinished, RequestStarted, SessionStarted, Sink, Speculation
from specterm.paths import portable

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


@dataclass
class _Conversation:
    name: str
    prompt: list[int]
    turns: int = 1


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
    ) -> None:
        self.addr = addr
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
        self.conversations: list[_Conversation] = []
        self.assemblers: list[StepAssembler] = []
        """Every request's assembler, finished ones too (their stats: totals and reconciliation)."""
        self._tok: Any = None
        self._stop = threading.Event()
        self._connected = False

    def stop(self) -> None:
        self._stop.set()

    # -- the socket loop ----------------------------------------------------------------------------

    def run(self) -> None:
        import zmq
        from zmq.utils.monitor import parse_monitor_message

        if not self.addr.startswith("tcp://"):
            hello = self._sidecar or read_sidecar(Path(self.addr.removeprefix("ipc://")))
            if hello is not None:
                self._on_hello(hello)
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
        poller = zmq.Poller()
        poller.register(sock, zmq.POLLIN)
        poller.register(monitor, zmq.POLLIN)
        try:
            while not self._stop.is_set():
                ready = dict(poller.poll(100))
                if monitor in ready:
                    event = parse_monitor_message(monitor.recv_multipart())["event"]
                    self._on_connection(event == zmq.EVENT_CONNECTED)
                if sock in ready:
                    _topic, payload = sock.recv_multipart()
                    self.handle(payload)
                if self.max_requests is not None and self.finished >= self.max_requests:
                    break
        finally:
            sock.disable_monitor()
            monitor.close(linger=0)
            sock.close(linger=0)

    def _warn(self, message: str, request_id: str | None = None) -> None:
        self.sink(Error(t=self.clock(), level="warning", where="attach", message=message, request_id=request_id))

    def _on_connection(self, up: bool) -> None:
        if up == self._connected:
            return
        self._connected = up
        if up:
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
        old, self.hello = self.hello, hello
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
        if old is None or old.tokenizer != hello.tokenizer:
            self._tok = None

    def tokenizer(self) -> Any:
        if self._tok is None:
            from transformers import AutoTokenizer

            path = self.tokenizer_path or (self.hello.tokenizer if self.hello else None)
            if path is None:
                raise AttachError("the server has not said which tokenizer it serves; pass --tokenizer")
            try:
                self._tok = AutoTokenizer.from_pretrained(path)
            except Exception as err:  # noqa: BLE001 - transformers raises many types
                raise AttachError(
                    f"cannot load the served model's tokenizer {path!r} here ({type(err).__name__}); "
                    "pass --tokenizer PATH with a copy of it"
                ) from None
        return self._tok

    def _on_batch(self, b: wire.Batch) -> None:
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
        conv, turn = self._conversation(o.prompt)
        params: dict[str, Any] = {"max_tokens": o.max_tokens, "temperature": o.temperature, "json_schema": o.structured}
        if o.output:
            params["joined_late"] = True
        self.sink(
            RequestStarted(
                t=self.clock(),
                request_id=o.id,
                prompt_tokens=len(o.prompt),
                params=params,
                conversation=conv,
                turn=turn,
            )
        )
        assembler = StepAssembler(o.id, self.tokenizer(), [*o.prompt, *o.output], self.clock, self.sink)
        self.assemblers.append(assembler)
        self.requests[o.id] = _Request(assembler, o.arrival, ttft=None if not o.output else 0.0, cached=o.cached)

    def _conversation(self, prompt: list[int]) -> tuple[str, int]:
        best = None
        for c in self.conversations:
            if (
                len(c.prompt) <= len(prompt)
                and prompt[: len(c.prompt)] == c.prompt
                and (best is None or len(c.prompt) > len(best.prompt))
            ):
                best = c
        if best is None:
            best = _Conversation(f"c{len(self.conversations) + 1}", list(prompt))
            self.conversations.append(best)
            return best.name, 1
        best.turns += 1
        best.prompt = list(prompt)
        return best.name, best.turns

    def _finish(self, rid: str, reason: str | None, cached: int | None, t: float) -> None:
        req = self.requests.pop(rid, None)
        if req is None:
            return
        text = self.tokenizer().decode(req.ids, skip_special_tokens=True) if req.ids else ""
        self.sink(
            RequestFinished(
                t=self.clock(),
                request_id=rid,
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


class RecordingSink:
    """The attach session's sink: ``record`` (a ``Recorder`` made on the server's ``session_started``,
    by ``make_recorder(header)``) and then ``show``. Events before the header (connection lines) wait
    for it, so the recording opens with its header as every session file does."""

    def __init__(self, show: Sink, make_recorder: Callable[[SessionStarted], Any], diagnoser: Any = None) -> None:
        from specterm.diagnose import Diagnoser

        self.show, self._make = show, make_recorder
        self._feed = (diagnoser if diagnoser is not None else Diagnoser()).feed
        self.recorder: Any = None
        self._early: list[BaseEvent] = []
        self._header_seen = False
        self._lock = threading.Lock()

    def __call__(self, event: BaseEvent) -> None:
        with self._lock:
            if isinstance(event, SessionStarted):
                if self._header_seen:
                    return
                self._header_seen = True
                self.recorder = self._make(event)
                early, self._early = self._early, []
                for e in [event, *early]:
                    self._emit(e, record=e is not event)
                return
            if not self._header_seen:
                self._early.append(event)
                return
            self._emit(event)

    def _emit(self, event: BaseEvent, record: bool = True) -> None:
        if record and self.recorder is not None:
            self.recorder.write(event)
        self.show(event)
        for finding in self._feed(event):  # what the detectors found: recorded and shown too
            self._emit(finding)

    def close(self) -> None:
        with self._lock:
            for e in self._early:  # a server that never said who it is: still show what happened
                self.show(e)
            self._early = []
            if self.recorder is not None:
                self.recorder.close()


def scrape_spec_counters(url: str) -> dict[str, int]:
    """vLLM's spec-decode counters from a server's Prometheus ``/metrics`` (summed over label sets),
    parsed with prometheus_client's own parser."""
    import urllib.request

    from prometheus_client.parser import text_string_to_metric_families

    from specterm.engine.verdicts import SPEC_METRICS

    with urllib.request.urlopen(url, timeout=5) as resp:  # a URL the user gave
        text = resp.read().decode()
    out = dict.fromkeys(SPEC_METRICS.values(), 0)
    for family in text_string_to_metric_families(text):
        key = SPEC_METRICS.get(family.name)
        if key is None:
            continue
        out[key] += int(sum(s.value for s in family.samples if s.name.endswith("_total")))
    return out
