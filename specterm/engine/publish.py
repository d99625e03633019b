"""The verdict hook inside ``vllm serve``: ``--scheduler-cls specterm.engine.publish.PublishingScheduler``.

``vllm serve`` runs its scheduler in the EngineCore process, away from the API server and from any
viewer, so the records ``CapturingScheduler`` keeps (``capture.py``) must leave that process. This
subclass sends them, one ``wire.Batch`` per engine step, on a ZeroMQ ``XPUB`` socket (terms and the
privacy rules in ``wire.py``); ``specterm attach`` turns them into the event vocabulary with the same
``StepAssembler`` the in-process engine uses, so both views of a request assign verdicts by one rule.

**The scheduler never waits for a reader.** Everything runs on the EngineCore's own thread, with
non-blocking calls only: a ``recv(NOBLOCK)`` per step for new subscriptions and connection events,
and a ``send(NOBLOCK)`` per step. ZeroMQ queues at most ``SPECTERM_PUBLISH_BUFFER`` batches per
subscriber (``SNDHWM``); with ``XPUB_NODROP`` a full queue makes the send fail at once instead of
dropping silently, and the publisher counts it (``Batch.dropped``: the viewer shows "N dropped").
With nobody connected the hook is switched off (``CapturingScheduler.capture``): no records, no
popcounts, no encoding; what remains is the two non-blocking polls.

vLLM internals read here, beyond ``capture.py``'s (pinned: vllm 0.32.0; listed with the rest in
``vllm_internals.py``; ``tests/test_attach.py`` runs a real ``vllm serve`` with this class): ``Scheduler.schedule`` (to time the step),
``Scheduler.requests`` and ``Request.prompt_token_ids`` / ``output_token_ids`` / ``arrival_time`` /
``prefill_stats.num_cached_tokens`` (read before vLLM takes it in ``update_from_output``) /
``sampling_params`` / ``use_structured_output`` / ``is_finished`` / ``get_finished_reason``;
``Scheduler.finish_requests`` (aborts: a client that went away, a stop string); ``Scheduler.shutdown``;
``vllm_config.model_config`` and ``speculative_config``. It subclasses ``Scheduler``, not
``AsyncScheduler``: vLLM then schedules synchronously (on CPU, and for n-gram drafting, it does
anyway); the draft ids a step verifies are only known to a synchronous scheduler.
"""

from __future__ import annotations

import atexit
import json
import logging
import os
import time
import uuid
from pathlib import Path
from typing import Any

from specterm.engine import wire
from specterm.engine.capture import CapturingScheduler
from specterm.events import Speculation

log = logging.getLogger("specterm.publish")


class Publisher:
    """The socket half: bind, who is listening, send without waiting. One thread only (the scheduler's)."""

    def __init__(self, addr: str, token: str | None, hello: wire.Hello, buffer: int = wire.DEFAULT_BUFFER) -> None:
        import zmq

        self.addr = addr
        self.topic = wire.topic_for(addr, token)
        self.hello = hello
        self.dropped = 0
        self.peers = 0
        self.fresh = False
        """A subscriber arrived since the last send: the next batch announces every running request."""
        self._path: Path | None = None
        if addr.startswith("tcp://"):
            if not token:
                raise ValueError(
                    f"publishing on {addr} needs a token ({wire.ENV_TOKEN}): the events carry prompts and outputs"
                )
        else:
            self._path = Path(addr.removeprefix("ipc://"))
            wire.private_dir(self._path.parent)
            if self._path.exists():
                if wire.unix_listener(self._path):
                    raise RuntimeError(
                        f"another server already publishes on {self._path}; set "
                        f"{wire.ENV_ADDR}=PATH to publish elsewhere"
                    )
                self._path.unlink()  # left by a server that was killed
        self._zmq = zmq
        self._ctx = zmq.Context.instance()
        sock = self._ctx.socket(zmq.XPUB)
        sock.setsockopt(zmq.XPUB_MANUAL, 1)  # we grant subscriptions: only the topic (wire.py)
        sock.setsockopt(zmq.XPUB_NODROP, 1)  # a full queue fails the send, so drops can be counted
        sock.setsockopt(zmq.SNDHWM, buffer)
        # A reader that stops entirely (Ctrl+Z) is held back only by the socket buffers between the
        # processes (about 200 KiB by default on Linux). The kernel counts a Unix socket's queue in
        # socket memory, not message bytes: a stopped reader held about 280 batches of 179 B, or 8 of
        # 8.5 KiB (measured here), so what a stalled reader costs stays bounded and small.
        sock.setsockopt(zmq.SNDBUF, 16 * 1024)
        sock.setsockopt(zmq.LINGER, 200)  # the goodbye gets out at shutdown, never longer
        # A name of its own: pyzmq's default is "inproc://monitor.s-<fd>", and a later socket that gets
        # the same fd in this process (the shared Context.instance()) could connect to the closed
        # socket's monitor and never hear of its peers (seen: a test's publisher saw no connection).
        self._monitor = sock.get_monitor_socket(
            zmq.EVENT_ACCEPTED | zmq.EVENT_DISCONNECTED, addr=f"inproc://specterm-publish-monitor-{uuid.uuid4().hex}"
        )
        sock.bind(addr)
        self.sock = sock
        if self._path is not None:
            os.chmod(self._path, 0o600)
            side = wire.sidecar(self._path)
            fd = os.open(side, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "wb") as f:
                f.write(json.dumps(wire.msgspec.to_builtins(hello)).encode())
        self.endpoint = sock.getsockopt_string(zmq.LAST_ENDPOINT)

    def poll(self) -> bool:
        """Take connection events and subscriptions; True while anyone is connected."""
        from zmq.utils.monitor import parse_monitor_message

        zmq = self._zmq
        while True:
            try:
                event = parse_monitor_message(self._monitor.recv_multipart(zmq.NOBLOCK))["event"]
            except zmq.Again:
                break
            self.peers += 1 if event == zmq.EVENT_ACCEPTED else -1
        while True:
            try:
                msg = self.sock.recv(zmq.NOBLOCK)
            except zmq.Again:
                break
            if msg == b"\x01" + self.topic:  # a subscription with the right topic (or token): granted
                self.sock.setsockopt(zmq.SUBSCRIBE, self.topic)
                self.fresh = True
        self.peers = max(self.peers, 0)
        return self.peers > 0

    def send(self, msg: Any) -> bool:
        if self.fresh:
            self.fresh = False
            self._send(self.hello)
        return self._send(msg)

    def _send(self, msg: Any) -> bool:
        try:
            self.sock.send_multipart([self.topic, wire.ENCODER.encode(msg)], self._zmq.NOBLOCK)
            return True
        except self._zmq.Again:
            self.dropped += 1
            return False

    def close(self, reason: str) -> None:
        if getattr(self, "sock", None) is None:
            return
        self._send(wire.Bye(reason=reason, dropped=self.dropped))
        self.sock.disable_monitor()  # stop the monitor before the socket goes: its endpoint goes too
        self._monitor.close(linger=0)
        self.sock.close()
        self.sock = None
        if self._path is not None:
            for p in (self._path, wire.sidecar(self._path)):
                p.unlink(missing_ok=True)


def hello_from(vllm_config: Any) -> wire.Hello:
    from specterm.engine.installs import vllm_installs  # the one place the vLLM build is detected

    model = vllm_config.model_config
    spec = getattr(vllm_config, "speculative_config", None)
    names = getattr(model, "served_model_name", None) or model.model
    installs = vllm_installs()
    speculation = None
    if spec is not None:
        speculation = Speculation(method=spec.method, num_speculative_tokens=spec.num_speculative_tokens).model_dump()
    return wire.Hello(
        version=wire.WIRE_VERSION,
        model=names[0] if isinstance(names, (list, tuple)) else str(names),
        tokenizer=str(getattr(model, "tokenizer", None) or model.model),
        spec=speculation,
        pid=os.getpid(),
        vllm=installs[0][2] if installs else "",
        dp_index=dp_index(vllm_config.parallel_config),
        instance=uuid.uuid4().hex,
        weight_bytes=_weight_bytes(vllm_config, spec),
    )


def _weight_bytes(vllm_config: Any, spec: Any) -> dict | None:
    """The served weights' bytes (``engine/weights.py``, the safetensors headers; the draft's only for a
    draft model), so a viewer's bandwidth panel works as it does in ``chat``; ``None`` when unreadable."""
    from specterm.engine.weights import weight_bytes

    try:
        dtype = str(vllm_config.model_config.dtype).removeprefix("torch.")
        target = weight_bytes(vllm_config.model_config.model, dtype)
        if target is None:
            return None
        draft = 0
        if spec is not None and getattr(spec, "draft_model_config", None) is not None and spec.method == "draft_model":
            draft = weight_bytes(spec.draft_model_config.model, dtype) or 0
        return {"target": target, "draft": draft}
    except Exception:  # noqa: BLE001 - a figure for a panel must never stop a server
        return None


def dp_index(parallel_config: Any) -> int:
    """This EngineCore's data-parallel rank. vLLM 0.32 reconfigures every rank of a dense (non-MoE)
    model as an independent DP = 1 engine (``v1/engine/core.py``, ``reconfigure_for_independent_dp_rank``),
    so ``data_parallel_rank`` is 0 on every rank there; ``data_parallel_index`` keeps the original rank
    ("not overridden for dense models", ``config/parallel.py``). Reading the rank made rank 1 bind rank
    0's socket and take the whole server down (issue 45)."""
    index = getattr(parallel_config, "data_parallel_index", None)
    if index is None:
        index = getattr(parallel_config, "data_parallel_rank", 0)
    return int(index or 0)


class PublishingScheduler(CapturingScheduler):
    """``CapturingScheduler`` that publishes each step's records to ``specterm attach`` (module doc)."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._t_schedule = time.perf_counter()
        self._seen: set[str] = set()
        """Requests the current subscribers have been sent (their prompt, once)."""
        self.publisher: Publisher | None = None
        self.capture = False
        addr = os.environ.get(wire.ENV_ADDR, "")
        if wire.publishing_off(addr):
            return
        rank = dp_index(self.vllm_config.parallel_config)
        try:
            buffer = int(os.environ.get(wire.ENV_BUFFER) or wire.DEFAULT_BUFFER)
            self.publisher = Publisher(
                wire.for_rank(wire.endpoint(addr or None), rank),
                os.environ.get(wire.ENV_TOKEN) or None,
                hello_from(self.vllm_config),
                buffer,
            )
        except Exception as err:  # noqa: BLE001 - the publisher must never be why a server fails to start
            why = " ".join(str(err).split())  # one line in the server's log, whatever the error
            who = f"data-parallel rank {rank}'s" if rank else "this engine's"
            log.warning("specterm: %s verdicts are not published (%s: %s)", who, type(err).__name__, why)
            return
        atexit.register(self.publisher.close, "server exited")
        log.warning(
            "specterm: publishing verdicts on %s; watch with: specterm attach %s",
            self.publisher.endpoint,
            self.publisher.endpoint,
        )

    def schedule(self, *args, **kwargs):
        self._t_schedule = time.perf_counter()
        pub = self.publisher
        if pub is not None:
            listening = pub.poll()
            if pub.fresh or not listening:
                self._seen.clear()
            self.capture = listening
        return super().schedule(*args, **kwargs)

    def update_from_output(self, scheduler_output, model_runner_output):
        if not self.capture:
            return super().update_from_output(scheduler_output, model_runner_output)
        reqs, before = {}, {}
        for req_id in scheduler_output.num_scheduled_tokens:
            req = self.requests.get(req_id)
            if req is not None:  # held: vLLM forgets a finished request inside update_from_output
                reqs[req_id] = req
                before[req_id] = (req.num_output_tokens, getattr(req.prefill_stats, "num_cached_tokens", None))
        out = super().update_from_output(scheduler_output, model_runner_output)
        try:
            self._publish(reqs, before)
        except Exception:  # a viewer must never take the server down
            log.exception("specterm: publishing failed; turned off for this server")
            self.publisher, self.capture = None, False
        return out

    def _open(self, req, n_before: int, cached: int | None) -> wire.ReqOpen:
        sp = req.sampling_params
        return wire.ReqOpen(
            id=req.request_id,
            prompt=list(req.prompt_token_ids or ()),
            output=list(req.output_token_ids[:n_before]),
            arrival=float(req.arrival_time),
            cached=cached,
            max_tokens=getattr(sp, "max_tokens", None),
            temperature=getattr(sp, "temperature", None),
            structured=bool(req.use_structured_output),
        )

    def _publish(self, reqs: dict, before: dict) -> None:
        opened, recs, done, batch = [], [], [], None
        for r in self.take_records():
            batch = r.batch_size
            req = reqs.get(r.req_id)
            if req is None:
                continue
            n0, cached = before[r.req_id]
            if r.req_id not in self._seen:
                self._seen.add(r.req_id)
                opened.append(self._open(req, n0, cached))
            recs.append(
                wire.Rec(
                    r.req_id,
                    list(r.drafted),
                    list(r.sampled),
                    list(req.output_token_ids[n0:]),
                    r.invalid,
                    r.padding,
                    None if r.allowed is None else list(r.allowed),
                )
            )
        for req_id, req in reqs.items():
            if req.is_finished() and req_id in self._seen:
                self._seen.discard(req_id)
                reason = req.get_finished_reason()
                done.append(wire.ReqDone(req_id, None if reason is None else str(reason), before[req_id][1]))
        if opened or recs or done:
            self.publisher.send(
                wire.Batch(
                    t=time.time(),
                    wall=time.perf_counter() - self._t_schedule,
                    dropped=self.publisher.dropped,
                    opened=opened,
                    recs=recs,
                    done=done,
                    batch_size=batch,
                )
            )

    def finish_requests(self, request_ids, finished_status):
        finished = super().finish_requests(request_ids, finished_status)
        if self.capture and finished and self.publisher is not None:
            done = [
                wire.ReqDone(r.request_id, str(r.get_finished_reason()), None)
                for r in finished
                if r.request_id in self._seen
            ]
            self._seen.difference_update(d.id for d in done)
            if done:
                self.publisher.send(wire.Batch(t=time.time(), wall=0.0, dropped=self.publisher.dropped, done=done))
        return finished

    def shutdown(self) -> None:
        if self.publisher is not None:
            self.publisher.close("server shut down")
        super().shutdown()
