"""What one ``specterm attach`` viewer can follow: a synthetic fleet of publishing ``vllm serve``
replicas at a swept event rate, watched headless (one ``Fleet``, as ``attach --headless``) and by the dashboard.

    python benchmarks/attach_scale.py [--side both|headless|ui|proxy] [--replicas 1,2,4,8,16]
        [--batch 1,8,32,64] [--ui-replicas 1,4] [--ui-batch 8,32,64,128] [--steps-per-s 30]
        [--duration 4] [--name NAME]

The publisher side is a separate process (``multiprocessing``, spawn) with one real
``engine.publish.Publisher`` per replica, each bound at its own ``ipc://`` socket in a temp dir, sending
real ``wire.Batch`` messages (the structs of ``engine/wire.py``, nothing copied) the way
``PublishingScheduler`` does: one batch per engine step, ``--steps-per-s`` steps a second, ``--batch``
requests in every step, each a ``Rec`` with ``-k`` drafted ids (a request's first step after prefill
drafts nothing), the request's prompt in a ``ReqOpen`` the step it starts and a ``ReqDone`` the step it
ends (64-256 output tokens, 64-512 prompt tokens). Token ids are windows of the repository's own docs
tokenised with a real tokenizer (SmolLM2-135M-Instruct's from ``.cache/test-models``, as the tests
build it), so detokenising costs what it costs on real text; acceptance: each draft position is kept
with probability ``--accept`` until the first miss. Request ids look like vLLM's.

Headless side: one ``session.fleet.Fleet`` over every replica address, as ``specterm attach ADDR
[ADDR ...] --headless`` runs it (one reading thread, one ``Attach`` per replica), into a counting sink
behind a lock (``--viewer threads``: one ``Attach`` per replica on its own thread instead). Measured per
point: ``spec_step`` events and tokens per second offered and handled, the receive lag (time from a
batch's ``Batch.t`` to its decoding starting), steps the publishers dropped (``Batch.dropped``), the
viewer process's CPU per event, and the time the viewer needs after the last step to catch up.

Dashboard side: the real app (``ui.attach_app.make_attach_app`` on the replicas' addresses) under
Textual's ``App.run_test()``, headless, frames paced as in a terminal. Measured: the time from a
step's ``Batch.t`` to the screen refresh after its ``spec_step`` was applied (``call_after_refresh``),
the bridge's backlog (events waiting for the UI thread), frames, and the catch-up time after the last
step. The only instrumentation: ``Attach`` is subclassed to note each batch's ``t`` (``Fleet`` builds its
``Attach`` by name, so the subclass is put in its place for the point), and the dashboard's bridge
``push`` and ``apply_events`` are wrapped to stamp events.

A point "keeps up" when nothing was dropped, every step arrived, the viewer caught up within
``--drain`` s, and the p99 lag stays under ``--lag-limit`` seconds (the dashboard draws at most every
``ui.pacing.MAX_FRAME_S`` while events stream, so its lag is never zero). Drops alone would not tell: a
viewer that is alive but slow never makes the publisher drop, because its SUB socket takes everything
(``RCVHWM`` 0) and the backlog waits in the viewer's own memory; the publisher's buffer
(``SPECTERM_PUBLISH_BUFFER``) fills only for a viewer that stops (Ctrl+Z) or in a burst. So the lag is
the signal. Everything runs on this machine's cores, publisher included: where the publisher itself
cannot keep ``--steps-per-s`` (its row says "publisher short") the offered rate is lower than asked.

Bounded: each point runs ``--duration`` s plus setup and at most ``--drain`` s of catch-up; one
publisher process serves every point (importing ``engine.publish`` imports vLLM's scheduler: seconds)
and is ended, and the temp dir removed, at the end, whatever happens.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing as mp
import os
import platform
import queue
import random
import resource
import shutil
import signal
import statistics
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
PROMPT_TOKENS = (64, 512)
OUTPUT_TOKENS = (64, 256)


def default_tokenizer() -> Path:
    """SmolLM2-135M-Instruct's tokenizer: the tests' copy (``tests/conftest.py``'s TEST_MODELS_DIR), else
    specterm's own model cache (``specterm models fetch smollm2``)."""
    tests = REPO / ".cache" / "test-models" / "smollm2-135m-instruct"
    if (tests / "tokenizer.json").is_file():
        return tests
    from specterm.models.fetch import smollm2_dir

    return smollm2_dir()


def corpus_ids(tokenizer: Path) -> list[int]:
    """Real token ids: this repository's docs, tokenised."""
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(tokenizer))
    text = "\n\n".join(p.read_text() for p in sorted((REPO / "docs").glob("*.md")))
    text += "\n\n" + (REPO / "README.md").read_text()
    return tok(text, add_special_tokens=False)["input_ids"]


def busy_jiffies() -> tuple[int, int]:
    """(busy, total) CPU time of the whole machine so far (``/proc/stat``): what else ran meanwhile."""
    try:
        fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    except (OSError, ValueError):
        return 0, 0
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)
    return sum(fields) - idle, sum(fields)


def busy_cores(before: tuple[int, int], after: tuple[int, int]) -> float | None:
    total = after[1] - before[1]
    return (after[0] - before[0]) / total * (os.cpu_count() or 1) if total else None


def pct(values: list[float], q: float) -> float | None:
    if not values:
        return None
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))]


# -- the publisher process ----------------------------------------------------------------------------


class Replica:
    """One synthetic ``vllm serve``: ``b`` requests in every step, each replaced when it finishes."""

    def __init__(self, index: int, pub, b: int, k: int, accept: float, corpus: list[int], rng: random.Random):
        self.index, self.pub, self.b, self.k, self.accept = index, pub, b, k, accept
        self.corpus, self.rng = corpus, rng
        self.slots: list[dict | None] = [None] * b
        self.seen: set[str] = set()

    def _window(self, n: int) -> list[int]:
        start = self.rng.randrange(0, len(self.corpus) - n - 1)
        return self.corpus[start : start + n]

    def _new(self) -> dict:
        rng = self.rng
        length = rng.randint(*OUTPUT_TOKENS)
        return {
            "id": f"chatcmpl-{uuid.uuid4().hex[:16]}-{uuid.uuid4().hex[:8]}",  # vLLM's shape
            "prompt": self._window(rng.randint(*PROMPT_TOKENS)),
            "ids": self._window(length + self.k + 1),
            "length": length,
            "pos": 0,
            "arrival": time.time(),
        }

    def step(self, wall: float):
        from specterm.engine import wire

        rng, k, opened, recs, done = self.rng, self.k, [], [], []
        for n, req in enumerate(self.slots):
            if req is None:
                req = self.slots[n] = self._new()
            rid, ids, pos = req["id"], req["ids"], req["pos"]
            if rid not in self.seen:  # as PublishingScheduler: the prompt once per subscriber
                self.seen.add(rid)
                opened.append(
                    wire.ReqOpen(
                        id=rid,
                        prompt=req["prompt"],
                        output=ids[:pos],
                        arrival=req["arrival"],
                        cached=0,
                        max_tokens=req["length"],
                        temperature=0.0,
                        structured=False,
                    )
                )
            if pos == 0:  # the step after prefill: one token, nothing drafted
                drafted, sampled = [], ids[:1]
            else:
                a = 0
                while a < k and rng.random() < self.accept:
                    a += 1
                drafted = ids[pos : pos + a]
                if a < k:
                    wrong = rng.choice(self.corpus)
                    while wrong == ids[pos + a]:
                        wrong = rng.choice(self.corpus)
                    drafted = [*drafted, wrong, *(rng.choice(self.corpus) for _ in range(k - a - 1))]
                sampled = ids[pos : pos + a + 1]
            emitted = sampled[: req["length"] - pos]  # the stop check cuts the tail at max_tokens
            recs.append(wire.Rec(rid, drafted, sampled, emitted, 0, 0, None))
            req["pos"] = pos + len(emitted)
            if req["pos"] >= req["length"]:
                done.append(wire.ReqDone(rid, "length", 0))
                self.seen.discard(rid)
                self.slots[n] = None
        return wire.Batch(
            t=time.time(), wall=wall, dropped=self.pub.dropped, opened=opened, recs=recs, done=done, batch_size=self.b
        )


def publisher_main(corpus: list[int], cmds: mp.Queue, out: mp.Queue) -> None:
    """The publisher process: one point after another (importing ``engine.publish`` imports vLLM's
    scheduler, seconds: once for the whole sweep), until ``None``."""
    from specterm.engine.publish import Publisher

    parent = os.getppid()
    out.put(("ready", os.getpid()))
    while True:
        try:
            cfg = cmds.get(timeout=1)
        except queue.Empty:
            if os.getppid() != parent:
                return  # the main process is gone (killed): end too
            continue
        if cfg is None:
            return
        try:
            if publish_point(Publisher, cfg, corpus, cmds, out) is None:
                return  # told to end while a point waited for its close
        except Exception as err:  # noqa: BLE001 - said to the main process, which stops
            out.put(("error", f"{type(err).__name__}: {err}"))


def publish_point(Publisher, cfg: dict, corpus: list[int], cmds: mp.Queue, out: mp.Queue) -> str | None:
    """Bind ``replicas`` publishers, wait for every viewer to subscribe, run the steps, report; then
    wait for the main process's ``close`` (returned; ``None``: the process is to end)."""
    from specterm.engine import wire

    m, b, s, k = cfg["replicas"], cfg["batch"], cfg["steps_per_s"], cfg["k"]
    rng = random.Random(cfg["seed"])
    reps: list[Replica] = []
    sent = [0] * m
    try:
        for i in range(m):
            hello = wire.Hello(  # a server of its own: its own instance (Fleet follows one instance once)
                version=wire.WIRE_VERSION,
                model="synthetic",
                tokenizer=cfg["tokenizer"],
                spec={"method": "ngram", "num_speculative_tokens": k},
                pid=os.getpid(),
                vllm="synthetic",
                instance=uuid.uuid4().hex,
            )
            pub = Publisher(f"ipc://{cfg['dir']}/r{i}.sock", None, hello, cfg["buffer"])
            reps.append(Replica(i, pub, b, k, cfg["accept"], corpus, rng))
        out.put(("bound", [r.pub.endpoint for r in reps]))
        granted = [False] * m
        deadline = time.monotonic() + 60
        while not all(granted):  # every viewer has subscribed (the topic granted)
            if time.monotonic() > deadline:
                raise RuntimeError("viewers did not subscribe within 60 s")
            for i, r in enumerate(reps):
                r.pub.poll()
                granted[i] |= r.pub.fresh
            time.sleep(0.01)
        out.put(("started", time.time()))
        period, n_steps = 1.0 / s, max(1, round(cfg["duration"] * s))
        sizes, rec_only, stats = (
            [],
            [0, 0],
            {"recs": 0, "tokens": 0, "opens": 0, "prompt_tokens": 0, "open_bytes": 0, "done": 0},
        )
        late = 0
        cpu0, t0 = time.process_time(), time.perf_counter()
        due = t0
        for _ in range(n_steps):
            step_started = time.perf_counter()
            for i, r in enumerate(reps):
                if r.pub.poll() is False or r.pub.fresh:
                    r.seen.clear()
                batch = r.step(wall=period)
                size = len(wire.ENCODER.encode(batch))
                sizes.append(size)
                if not batch.opened and not batch.done:
                    rec_only[0] += size
                    rec_only[1] += len(batch.recs)
                stats["recs"] += len(batch.recs)
                stats["tokens"] += sum(len(x.emitted) for x in batch.recs)
                stats["opens"] += len(batch.opened)
                stats["prompt_tokens"] += sum(len(o.prompt) for o in batch.opened)
                stats["open_bytes"] += sum(len(wire.ENCODER.encode(o)) for o in batch.opened)
                stats["done"] += len(batch.done)
                sent[i] += r.pub.send(batch)
            t_last = time.time()
            due += period
            now = time.perf_counter()
            if now < due:
                time.sleep(due - now)
            elif now - step_started > period or now > due + period:
                late += 1
                due = now  # an engine that falls behind runs fewer steps, it does not burst
        elapsed = time.perf_counter() - t0
        out.put(
            (
                "done",
                {
                    "steps": n_steps,
                    "seconds": elapsed,
                    "steps_per_s": n_steps / elapsed,
                    "late_steps": late,
                    "cpu_s": time.process_time() - cpu0,
                    "dropped": sum(r.pub.dropped for r in reps),
                    "bytes": sum(sizes),
                    "bytes_per_step": statistics.mean(sizes),
                    "bytes_per_step_max": max(sizes),
                    "rec_only_bytes_per_rec": rec_only[0] / rec_only[1] if rec_only[1] else None,
                    "t_last": t_last,
                    "sent": sent,
                    **stats,
                },
            )
        )
        # Open until the viewers have taken every batch: a closing socket keeps unsent messages
        # only for its linger (200 ms), and a point's last steps must not be lost to its end.
        return cmds.get(timeout=cfg["drain"] + 30)
    finally:
        for r in reps:
            r.pub.close("benchmark done")


class PublisherProc:
    """The publisher process, started once; ``point(cfg)`` runs one point there."""

    def __init__(self, corpus: list[int]) -> None:
        ctx = mp.get_context("spawn")
        self.cmds: mp.Queue = ctx.Queue()
        self.q: mp.Queue = ctx.Queue()
        self.proc = ctx.Process(target=publisher_main, args=(corpus, self.cmds, self.q), daemon=True)
        self.proc.start()
        self.expect("ready", 120)

    def point(self, cfg: dict) -> None:
        self.cmds.put(cfg)

    def close_point(self) -> None:
        """The viewers have what they will get: the publishers may say goodbye and close."""
        self.cmds.put("close")

    def expect(self, what: str, timeout: float):
        try:
            kind, value = self.q.get(timeout=timeout)
        except queue.Empty:
            raise RuntimeError(f"publisher: no {what!r} within {timeout:.0f} s") from None
        if kind != what:
            raise RuntimeError(f"publisher: {value}")
        return value

    def stop(self) -> None:
        if self.proc.is_alive():
            self.cmds.put(None)
            self.proc.join(10)
        if self.proc.is_alive():
            self.proc.terminate()
            self.proc.join(5)
        self.cmds.close()
        self.q.close()


# -- the viewer side -------------------------------------------------------------------------------


class Timing:
    """What the instrumented ``Attach`` notes, shared by every replica of a point: the ``Batch.t`` being
    handled now (one reading thread in a ``Fleet``) and each reading thread's CPU while handling."""

    def __init__(self) -> None:
        self.batch_t = 0.0
        self.cpu: dict[int, list[float]] = {}
        """Reading thread → [its CPU time at its first batch, at its latest]."""

    def thread_cpu(self) -> float:
        return sum(last - first for first, last in self.cpu.values())


def timed_attach_class(timing: Timing):
    from specterm.session.attach import Attach

    class TimedAttach(Attach):
        """``Attach`` noting, for each batch, how long it waited (``Batch.t`` to decoding) and its ``t``."""

        def __init__(self, *args, **kwargs) -> None:
            super().__init__(*args, **kwargs)
            self.lags: list[float] = []
            self.batches = 0
            self.last_handled = 0.0
            self.bye = threading.Event()

        def _on_batch(self, b) -> None:
            cpu = timing.cpu.setdefault(threading.get_ident(), [time.thread_time()] * 2)
            timing.batch_t = b.t
            self.batches += 1
            self.lags.append(time.time() - b.t)
            super()._on_batch(b)
            self.last_handled = time.time()
            cpu[1] = time.thread_time()

        def _server_gone(self, message: str) -> None:
            super()._server_gone(message)
            self.bye.set()

    return TimedAttach


class use_attach:
    """Put ``cls`` in place of ``Attach`` where ``Fleet`` builds one per replica (``session.fleet`` takes
    it by name): the real fleet and the real dashboard, with the instrumented ``Attach``."""

    def __init__(self, cls) -> None:
        import specterm.session.fleet as fleet_mod

        self.mod, self.cls = fleet_mod, cls

    def __enter__(self) -> None:
        self.real, self.mod.Attach = self.mod.Attach, self.cls

    def __exit__(self, *exc) -> None:
        self.mod.Attach = self.real


class CountingSink:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.counts: dict[str, int] = {}
        self.tokens = 0
        self.warnings: list[str] = []

    def __call__(self, event) -> None:
        with self.lock:
            kind = event.type if hasattr(event, "type") else type(event).__name__
            self.counts[kind] = self.counts.get(kind, 0) + 1
            if kind == "spec_step":
                self.tokens += len(event.tokens)
            elif kind == "error" and "dropped" in event.message:
                self.warnings.append(event.message)


def point_cfg(args, tmp: Path, m: int, b: int, s: float) -> dict:
    return {
        "replicas": m,
        "batch": b,
        "steps_per_s": s,
        "k": args.k,
        "accept": args.accept,
        "duration": args.duration,
        "buffer": args.buffer,
        "tokenizer": str(args.tokenizer),
        "seed": args.seed,
        "drain": args.drain,
        "dir": str(tmp),
    }


def summarise(pub: dict, m: int, b: int, s: float) -> dict:
    return {
        "load": os.getloadavg()[0],
        "replicas": m,
        "batch": b,
        "steps_per_s": s,
        "offered_events_per_s": pub["recs"] / pub["seconds"],
        "offered_tokens_per_s": pub["tokens"] / pub["seconds"],
        "publisher": pub,
        "bytes_per_step": pub["bytes_per_step"],
        "bytes_per_request_step": pub["bytes_per_step"] / b,
        "wire_kib_per_s": pub["bytes"] / pub["seconds"] / 1024,
        "publisher_kept_rate": pub["steps_per_s"] >= 0.95 * s,
        "bytes_per_rec": pub["rec_only_bytes_per_rec"],
        "bytes_per_open": pub["open_bytes"] / pub["opens"] if pub["opens"] else None,
        "bytes_per_prompt_token": pub["open_bytes"] / pub["prompt_tokens"] if pub["prompt_tokens"] else None,
    }


def run_headless_point(args, pub: PublisherProc, root: Path, m: int, b: int, s: float) -> dict:
    """``--viewer fleet``: one ``session.fleet.Fleet`` over every replica (what ``specterm attach A B …
    --headless`` runs: one reading thread, one poller); ``threads``: one ``Attach`` per replica, each on
    its own thread. Either way into one counting sink behind a lock."""
    from specterm.session.attach import check_address
    from specterm.session.fleet import Fleet, Target

    timing = Timing()
    TimedAttach = timed_attach_class(timing)
    tmp = Path(tempfile.mkdtemp(prefix="p", dir=root))
    pub.point(point_cfg(args, tmp, m, b, s))
    sink, stoppers, threads = CountingSink(), [], []
    attaches: dict[str, Any] = {}
    with use_attach(TimedAttach):
        try:
            addrs = pub.expect("bound", 30)
            hellos = {a: check_address(a) for a in addrs}
            if args.viewer == "fleet":
                fleet = Fleet([Target(a) for a in addrs], sink, hellos=hellos)
                stoppers.append(fleet)
                threads.append(threading.Thread(target=fleet.run, daemon=True, name="fleet"))
            else:
                for a in addrs:
                    attaches[a] = TimedAttach(a, sink, hello=hellos[a])
                    stoppers.append(attaches[a])
                    threads.append(threading.Thread(target=attaches[a].run, daemon=True, name=f"attach-{a}"))
            for t in threads:
                t.start()
            pub.expect("started", 90)
            if args.viewer == "fleet":
                attaches = {r.addr: r.attach for r in fleet.replicas}
            cpu0, wall0, busy0 = time.process_time(), time.perf_counter(), busy_jiffies()
            res = pub.expect("done", args.duration * 3 + 30)
            sent = dict(zip(addrs, res["sent"]))

            def caught_up() -> bool:
                return all(attaches[a].batches >= n for a, n in sent.items())

            deadline = time.monotonic() + args.drain
            while time.monotonic() < deadline and not caught_up():
                time.sleep(0.02)
            done = caught_up()
            cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
            busy = busy_cores(busy0, busy_jiffies())
            pub.close_point()
            deadline = time.monotonic() + 10
            while not all(a.bye.is_set() for a in attaches.values()) and time.monotonic() < deadline:
                time.sleep(0.02)
        finally:
            for x in stoppers:
                x.stop()
            for t in threads:
                t.join(5)
            shutil.rmtree(tmp, ignore_errors=True)
    views = list(attaches.values())
    lags = [x for a in views for x in a.lags]
    tail = [x for a in views for x in a.lags[int(len(a.lags) * 0.75) :]]
    steps = sink.counts.get("spec_step", 0)
    dropped = max(sum(a.dropped for a in views), res["dropped"])
    row = summarise(res, m, b, s) | {
        "side": "headless",
        "viewer": args.viewer,
        "handled_events": steps,
        "handled_tokens": sink.tokens,
        "lost_events": res["recs"] - steps,
        "dropped_steps": dropped,
        "lag_p50_s": pct(lags, 0.5),
        "lag_p99_s": pct(lags, 0.99),
        "lag_max_s": max(lags, default=None),
        "lag_tail_p50_s": pct(tail, 0.5),
        "catch_up_s": max(max(a.last_handled for a in views) - res["t_last"], 0.0) if done else None,
        "viewer_cpu_s": cpu,
        "viewer_cpu_share": cpu / wall,
        "viewer_cpu_us_per_event": cpu / steps * 1e6 if steps else None,
        "reading_threads_cpu_s": timing.thread_cpu(),
        "machine_busy_cores": busy,
        "viewer_maxrss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "events": dict(sink.counts),
    }
    row["keeps_up"] = bool(
        done and not dropped and row["lost_events"] == 0 and (row["lag_p99_s"] or 0) < args.lag_limit
    )
    return row


async def run_ui_point(args, pub: PublisherProc, root: Path, m: int, b: int, s: float) -> dict:
    from specterm.events import SpecStep
    from specterm.session.attach import check_address
    from specterm.session.fleet import Target
    from specterm.ui.attach_app import make_attach_app

    timing = Timing()
    TimedAttach = timed_attach_class(timing)
    tmp = Path(tempfile.mkdtemp(prefix="p", dir=root))
    pub.point(point_cfg(args, tmp, m, b, s))
    born: dict[tuple[str, int], float] = {}
    drawn: list[tuple[float, float]] = []  # (Batch.t, lag to the refresh after it was applied)
    backlog: list[int] = []
    frames = [0]
    with use_attach(TimedAttach):
        try:
            addrs = pub.expect("bound", 30)
            hellos = {a: check_address(a) for a in addrs}
            app = make_attach_app([Target(a) for a in addrs], hellos=hellos, gpu=False, theme_dirs=())
            push, apply = app.bridge.push, app.apply_events

            def stamped_push(ev) -> None:  # the fleet's reading thread
                if type(ev) is SpecStep:
                    born[(ev.request_id, ev.index)] = timing.batch_t
                push(ev)

            def stamped_apply(events, **kw):  # the UI thread
                frames[0] += 1
                keys = [(e.request_id, e.index) for e in events if type(e) is SpecStep]
                apply(events, **kw)

                def refreshed() -> None:
                    now = time.time()
                    for key in keys:
                        t = born.pop(key, None)
                        if t is not None:
                            drawn.append((t, now - t))

                app.call_after_refresh(refreshed)

            app.bridge.push = stamped_push  # type: ignore[method-assign]
            app.apply_events = stamped_apply  # type: ignore[method-assign]
            w, h = (int(x) for x in args.size.split("x"))
            async with app.run_test(size=(w, h)) as pilot:
                await pilot.pause()
                loop = asyncio.get_running_loop()
                await loop.run_in_executor(None, pub.expect, "started", 90)
                fleet = app.source
                attaches = {r.addr: r.attach for r in fleet.replicas}
                cpu0, wall0, busy0, ui0 = time.process_time(), time.perf_counter(), busy_jiffies(), time.thread_time()
                done = loop.run_in_executor(None, pub.expect, "done", args.duration * 3 + 30)
                while not done.done():
                    backlog.append(len(app.bridge))
                    await asyncio.sleep(0.05)
                res = done.result()
                sent = dict(zip(addrs, res["sent"]))

                def drained() -> bool:
                    taken = all(attaches[a].batches >= n for a, n in sent.items())
                    return taken and len(app.bridge) == 0 and not born

                deadline = time.monotonic() + args.drain
                while time.monotonic() < deadline and not drained():
                    backlog.append(len(app.bridge))
                    await asyncio.sleep(0.05)
                caught_up = drained()
                t_caught_up = max((t + lag for t, lag in drawn), default=res["t_last"])
                cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
                busy = busy_cores(busy0, busy_jiffies())
                ui_cpu = time.thread_time() - ui0  # the UI thread (Textual's loop runs on this one)
                pub.close_point()
                deadline = time.monotonic() + 10
                while not all(a.bye.is_set() for a in attaches.values()) and time.monotonic() < deadline:
                    await asyncio.sleep(0.05)
                await pilot.pause()
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    views = list(attaches.values())
    lags = [lag for _t, lag in drawn]
    tail = [lag for t, lag in drawn if t >= res["t_last"] - res["seconds"] / 4]
    row = summarise(res, m, b, s) | {
        "side": "dashboard",
        "handled_events": len(drawn),
        "lost_events": res["recs"] - len(drawn),
        "dropped_steps": max(sum(a.dropped for a in views), res["dropped"]),
        "receive_lag_p99_s": pct([x for a in views for x in a.lags], 0.99),
        "lag_p50_s": pct(lags, 0.5),
        "lag_p99_s": pct(lags, 0.99),
        "lag_max_s": max(lags, default=None),
        "lag_tail_p50_s": pct(tail, 0.5),
        "backlog_max": max(backlog, default=0),
        "frames": frames[0],
        "catch_up_s": max(t_caught_up - res["t_last"], 0.0) if caught_up else None,
        "viewer_cpu_s": cpu,
        "viewer_cpu_share": cpu / wall,
        "viewer_cpu_us_per_event": cpu / len(drawn) * 1e6 if drawn else None,
        "attach_thread_cpu_s": timing.thread_cpu(),
        "ui_thread_cpu_s": ui_cpu,
        "machine_busy_cores": busy,
        "viewer_maxrss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }
    row["keeps_up"] = bool(
        caught_up and not row["dropped_steps"] and row["lost_events"] == 0 and (row["lag_p99_s"] or 0) < args.lag_limit
    )
    return row


def proxy_main(endpoints: list[str], front: str, buffer: int, out: mp.Queue) -> None:
    """A relay: ZeroMQ's own XSUB/XPUB proxy (``zmq.proxy``), connected to every replica, bound at ``front``.
    Subscriptions travel up through it, so each ``Publisher`` grants its topic as for a direct viewer."""
    import zmq

    ctx = zmq.Context()
    xsub, xpub = ctx.socket(zmq.XSUB), ctx.socket(zmq.XPUB)
    xpub.setsockopt(zmq.SNDHWM, buffer)
    for e in endpoints:
        xsub.connect(e)
    xpub.bind(front)
    out.put(("proxy", os.getpid()))
    zmq.proxy(xsub, xpub)  # forever: the main process ends this process


def proc_cpu(pid: int) -> float:
    """CPU seconds (user + system) of another process so far."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def run_proxy_point(args, pub: PublisherProc, root: Path, m: int, b: int, s: float) -> dict:
    """The replicas through one ``zmq.proxy`` process to one plain subscriber that only counts and reads
    each batch's ``t`` (no decoding into events): what the relay carries, apart from any viewer's cost."""
    import zmq

    from specterm.engine import wire

    tmp = Path(tempfile.mkdtemp(prefix="p", dir=root))
    pub.point(point_cfg(args, tmp, m, b, s))
    front = f"ipc://{tmp}/proxy.sock"
    ctx = mp.get_context("spawn")
    q: mp.Queue = ctx.Queue()
    proxy = None
    lags: list[float] = []
    got = {"batches": 0, "recs": 0}
    stop = threading.Event()
    sub = zmq.Context.instance().socket(zmq.SUB)
    try:
        endpoints = pub.expect("bound", 30)
        proxy = ctx.Process(target=proxy_main, args=(endpoints, front, args.buffer, q), daemon=True)
        proxy.start()
        q.get(timeout=60)
        sub.setsockopt(zmq.LINGER, 0)
        sub.setsockopt(zmq.RCVHWM, 0)  # as Attach sets it
        sub.setsockopt(zmq.SUBSCRIBE, wire.TOPIC)
        sub.connect(front)

        def read() -> None:
            while not stop.is_set():
                if not sub.poll(100):
                    continue
                msg = wire.decode(sub.recv_multipart()[1])
                if isinstance(msg, wire.Batch):
                    lags.append(time.time() - msg.t)
                    got["batches"] += 1
                    got["recs"] += len(msg.recs)

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        pub.expect("started", 90)
        cpu0, wall0, busy0, pcpu0 = time.process_time(), time.perf_counter(), busy_jiffies(), proc_cpu(proxy.pid)
        res = pub.expect("done", args.duration * 3 + 30)
        deadline = time.monotonic() + args.drain
        while time.monotonic() < deadline and got["batches"] < sum(res["sent"]):
            time.sleep(0.02)
        last = time.time()
        caught_up = got["batches"] >= sum(res["sent"])
        cpu, wall, busy = time.process_time() - cpu0, time.perf_counter() - wall0, busy_cores(busy0, busy_jiffies())
        proxy_cpu = proc_cpu(proxy.pid) - pcpu0
        pub.close_point()
        stop.set()
        reader.join(5)
    finally:
        stop.set()
        sub.close(linger=0)
        if proxy is not None and proxy.is_alive():
            proxy.terminate()
            proxy.join(5)
        q.close()
        shutil.rmtree(tmp, ignore_errors=True)
    row = summarise(res, m, b, s) | {
        "side": "proxy",
        "handled_events": got["recs"],
        "lost_events": res["recs"] - got["recs"],
        "dropped_steps": res["dropped"],
        "lag_p50_s": pct(lags, 0.5),
        "lag_p99_s": pct(lags, 0.99),
        "lag_max_s": max(lags, default=None),
        "catch_up_s": max(last - res["t_last"], 0.0) if caught_up else None,
        "viewer_cpu_share": cpu / wall,
        "viewer_cpu_us_per_event": cpu / got["recs"] * 1e6 if got["recs"] else None,
        "proxy_cpu_share": proxy_cpu / wall,
        "machine_busy_cores": busy,
    }
    row["keeps_up"] = bool(
        caught_up and not row["dropped_steps"] and row["lost_events"] == 0 and (row["lag_p99_s"] or 0) < args.lag_limit
    )
    return row


def fmt(v, spec: str) -> str:
    return "-" if v is None else format(v, spec)


def print_table(rows: list[dict], side: str) -> None:
    rows = [r for r in rows if r["side"] == side]
    if not rows:
        return
    first = rows[0]["offered_events_per_s"] or 1.0
    dash = side == "dashboard"
    print(
        f"\n{side}: spec_step events/s offered (M replicas × B requests a step × S steps/s) and what the viewer did;"
        "\nlag: Batch.t to "
        + {"dashboard": "the refresh after the event was applied", "headless": "the batch's decoding"}.get(
            side, "the subscriber's receipt"
        )
        + "; catchup: after the last step; cpu%: the viewer process, of one core; busy: cores busy on the"
        " machine, everything included"
    )
    print(
        f"{'M':>3} {'B':>4} {'S':>4} {'events/s':>9} {'×first':>7} {'tok/s':>7} {'B/step':>7} {'B/req':>6}"
        f" {'KiB/s':>7} {'lag p50':>8} {'p99':>7} {'max':>7} {'catchup':>8} {'drops':>5} {'lost':>5}"
        f" {'cpu%':>5} {'µs/ev':>6} {'busy':>5} {'pubS/s':>6}"
        + (f" {'recv p99':>8} {'backlog':>7} {'frames':>6}" if dash else "")
        + (f" {'proxy%':>6}" if side == "proxy" else "")
        + "  ok"
    )
    for r in rows:
        line = (
            f"{r['replicas']:>3} {r['batch']:>4} {r['steps_per_s']:>4g} {r['offered_events_per_s']:>9.0f}"
            f" {r['offered_events_per_s'] / first:>7.1f} {r['offered_tokens_per_s']:>7.0f}"
            f" {r['bytes_per_step']:>7.0f} {r['bytes_per_request_step']:>6.1f} {r['wire_kib_per_s']:>7.1f}"
            f" {fmt(r['lag_p50_s'], '8.3f')} {fmt(r['lag_p99_s'], '7.3f')} {fmt(r['lag_max_s'], '7.3f')}"
            f" {fmt(r['catch_up_s'], '8.2f')} {r['dropped_steps']:>5} {r['lost_events']:>5}"
            f" {100 * r['viewer_cpu_share']:>5.0f} {fmt(r['viewer_cpu_us_per_event'], '6.0f')}"
            f" {fmt(r['machine_busy_cores'], '5.2f')} {r['publisher']['steps_per_s']:>6.1f}"
        )
        if dash:
            line += f" {fmt(r['receive_lag_p99_s'], '8.3f')} {r['backlog_max']:>7} {r['frames']:>6}"
        elif side == "proxy":
            line += f" {100 * r['proxy_cpu_share']:>6.0f}"
        print(
            line + ("  yes" if r["keeps_up"] else "  NO") + ("" if r["publisher_kept_rate"] else " (publisher short)")
        )
    ok = [r for r in rows if r["keeps_up"] and r["publisher_kept_rate"]]
    if ok:
        best = max(ok, key=lambda r: r["offered_events_per_s"])
        print(
            f"highest rate followed: {best['offered_events_per_s']:.0f} events/s "
            f"({best['replicas']} replica(s) × {best['batch']} requests × {best['steps_per_s']:g} steps/s), "
            f"{best['offered_tokens_per_s']:.0f} tokens/s, {best['wire_kib_per_s']:.0f} KiB/s on the wire"
        )
    bad = [r for r in rows if not r["keeps_up"] or not r["publisher_kept_rate"]]
    if bad:
        worst = min(bad, key=lambda r: r["offered_events_per_s"])
        why = "the viewer fell behind" if not worst["keeps_up"] else "the publisher could not keep its rate"
        print(
            f"lowest rate not followed: {worst['offered_events_per_s']:.0f} events/s "
            f"({worst['replicas']} × {worst['batch']} × {worst['steps_per_s']:g}): {why}"
        )


def ints(text: str) -> list[int]:
    return [int(x) for x in text.split(",") if x]


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument(
        "--side",
        choices=("both", "headless", "ui", "proxy"),
        default="both",
        help="both: headless and the dashboard; proxy: the replicas through one zmq.proxy relay (its own grid)",
    )
    p.add_argument("--replicas", default="1,2,4,8,16", help="headless: replicas (publishers), comma-separated")
    p.add_argument("--batch", default="1,8,32,64", help="headless: requests in every step, comma-separated")
    p.add_argument("--ui-replicas", default="1,4", help="dashboard: replicas, comma-separated")
    p.add_argument("--ui-batch", default="8,32,64,128", help="dashboard: requests in every step, comma-separated")
    p.add_argument(
        "--viewer",
        choices=("fleet", "threads"),
        default="fleet",
        help="headless: one Fleet over every replica (as specterm attach A B ... runs), or one Attach thread each",
    )
    p.add_argument("--steps-per-s", default="30", help="engine steps a second per replica, comma-separated")
    p.add_argument("-k", type=int, default=4, help="drafted tokens per step")
    p.add_argument("--accept", type=float, default=0.7, help="chance each draft position is kept")
    p.add_argument("--duration", type=float, default=4.0, help="seconds of steps per point")
    p.add_argument("--drain", type=float, default=15.0, help="most seconds to wait for a viewer to catch up")
    p.add_argument("--lag-limit", type=float, default=1.5, help="p99 lag (s) above which a viewer falls behind")
    p.add_argument("--buffer", type=int, default=None, help="batches queued per subscriber (default: the publisher's)")
    p.add_argument("--size", default="160x48", help="dashboard terminal size WxH")
    p.add_argument("--tokenizer", type=Path, default=None)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--name", default="local", help="results go to benchmarks/results/attach_scale_NAME.json")
    args = p.parse_args()
    # SIGTERM (timeout, kill) unwinds like Ctrl+C: the publisher process and temp dir still go
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    from specterm.engine import wire

    if args.buffer is None:
        args.buffer = int(os.environ.get(wire.ENV_BUFFER) or wire.DEFAULT_BUFFER)
    args.tokenizer = args.tokenizer or default_tokenizer()
    corpus = corpus_ids(args.tokenizer)
    rates = [float(x) for x in args.steps_per_s.split(",")]
    rows: list[dict] = []
    started = time.perf_counter()
    print(
        f"{os.cpu_count()} CPUs, load {os.getloadavg()[0]:.2f}; tokenizer {args.tokenizer.name} "
        f"({len(corpus)} corpus tokens); k={args.k}, accept {args.accept}; {args.duration:g} s a point; "
        f"buffer {args.buffer} batches",
        flush=True,
    )
    # ipc:// paths must stay short (a Unix socket's ~107 bytes): a temp dir directly under /tmp
    root = Path(tempfile.mkdtemp(prefix="specterm-scale-", dir="/tmp" if Path("/tmp").is_dir() else None))
    pub = None
    try:
        pub = PublisherProc(corpus)
        sweeps = []  # (side, run a point, its replicas and batch sizes, its CPU figure and that label)
        if args.side in ("both", "headless"):
            sweeps.append(("headless", run_headless_point, args.replicas, args.batch, "viewer_cpu_share", "cpu"))
        if args.side == "proxy":
            sweeps.append(("proxy", run_proxy_point, args.replicas, args.batch, "proxy_cpu_share", "proxy cpu"))
        if args.side in ("both", "ui"):
            ui = lambda *a: asyncio.run(run_ui_point(*a))  # noqa: E731 - one point, its own event loop
            sweeps.append(("dashboard", ui, args.ui_replicas, args.ui_batch, None, None))
        for side, run_point, replicas, batches, cpu_key, cpu_label in sweeps:
            for s in rates:
                for m in ints(replicas):
                    for b in ints(batches):
                        row = run_point(args, pub, root, m, b, s)
                        rows.append(row)
                        extra = (
                            f"{cpu_label} {100 * row[cpu_key]:.0f}%" if cpu_key else f"backlog max {row['backlog_max']}"
                        )
                        print(
                            f"{side} M={m} B={b} S={s:g}: {row['offered_events_per_s']:.0f} ev/s, "
                            f"lag p99 {fmt(row['lag_p99_s'], '.3f')} s, drops {row['dropped_steps']}, {extra}",
                            flush=True,
                        )
    finally:
        if pub is not None:
            pub.stop()
        shutil.rmtree(root, ignore_errors=True)
    print_table(rows, "headless")
    print_table(rows, "dashboard")
    print_table(rows, "proxy")
    if rows:
        per_rec = [r["bytes_per_rec"] for r in rows if r["bytes_per_rec"]]
        per_tok = [r["bytes_per_prompt_token"] for r in rows if r["bytes_per_prompt_token"]]
        print(
            f"\nwire: {statistics.median(per_rec):.1f} bytes per request in a step (a Rec, k={args.k}; median "
            f"over points), plus {statistics.median(per_tok):.2f} bytes per prompt token once per request "
            f"(its ReqOpen); B/step above is the mean encoded Batch, opens and dones included"
        )
    out = REPO / "benchmarks" / "results" / f"attach_scale_{args.name}.json"
    meta = {
        "command": "python benchmarks/attach_scale.py " + " ".join(sys.argv[1:]),
        "cpus": os.cpu_count(),
        "cpu": platform.processor() or platform.machine(),
        "load_before": os.getloadavg(),
        "seconds": time.perf_counter() - started,
        "args": {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()},
        "prompt_tokens": PROMPT_TOKENS,
        "output_tokens": OUTPUT_TOKENS,
    }
    out.write_text(json.dumps({"meta": meta, "rows": rows}, indent=1) + "\n")
    print(f"\n{time.perf_counter() - started:.0f} s in all; wrote {out.relative_to(REPO)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
