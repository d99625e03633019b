"""The detectors: events in, one at a time, ``Finding`` events out.

``Diagnoser.feed(event)`` is the whole interface, so ``chat``, ``attach``, ``replay`` (dashboard,
headless, ``--summary``) run the same code on the same stream; ``diagnosing(sink, diagnoser)`` puts
it in front of a sink. Every detector keeps running sums (a window's, a baseline's, a request's), so
a step costs the same at step 10 and step 100,000; a request's checks run once, when it finishes.
Spec steps are duck-typed (``SpecStep``'s fields): ``replay --summary`` feeds its slim structs.

Each detector reports one finding per *episode*: a collapse is reported when the window falls below
the baseline and not again until it has recovered; a spike once per run of slow steps.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import Any

from specterm.diagnose.thresholds import Thresholds
from specterm.events import BaseEvent, Finding, Sink

_NONE: tuple[Finding, ...] = ()
_MEDIAN_EVERY = 16
"""Decode steps between two recomputations of the running median (a sort of ``_LATENCY_RING``)."""
_LATENCY_RING = 64
_MAX_ASKED = 10_000
"""User messages remembered for outlier reports (a long attach session must not grow without end)."""


class _Request:
    __slots__ = ("tail", "drafted", "accepted", "kind", "prompt_tokens")

    def __init__(self, tail_len: int, kind: str, prompt_tokens: int = 0) -> None:
        self.tail: deque[Any] = deque(maxlen=tail_len)  # the last tokens, for the loop check
        self.drafted = self.accepted = 0
        self.kind, self.prompt_tokens = kind, prompt_tokens


class _Scope:
    """One stream's rolling state (a ``compare`` session has two, one per lane: never mixed)."""

    __slots__ = (
        "win", "wk", "wa", "wbad", "wpass", "wtok",
        "bsteps", "bk", "ba", "bpass", "btok",
        "collapse", "invalid", "passes", "spiking", "held", "prefill_wall", "ring", "decode_steps", "median", "agent_kind",
    )  # fmt: skip

    def __init__(self) -> None:
        self.win: deque[tuple[int, int, int, int, int]] = deque()
        self.wk = self.wa = self.wbad = self.wpass = self.wtok = 0  # the window's sums
        self.bsteps = self.bk = self.ba = self.bpass = self.btok = 0  # the baseline: steps older than it
        self.collapse = self.invalid = self.passes = self.spiking = False  # episodes open
        self.ring: deque[float] = deque(maxlen=_LATENCY_RING)
        self.decode_steps = 0
        self.median: float | None = None
        self.held: Finding | None = None  # a spike waiting for the rest of its engine step
        self.prefill_wall: float | None = None  # the wall time of the last engine step that prefilled
        self.agent_kind: str | None = None


class Diagnoser:
    """Feed it every event in stream order; it returns the findings that event completes."""

    def __init__(self, thresholds: Thresholds | None = None) -> None:
        self.thresholds = thresholds or Thresholds()
        self._handlers: dict[str, Callable[[Any], Any]] = {
            "spec_step": self.step,
            "request_started": self._started,
            "request_finished": self._finished,
            "user_message": self._asked_text,
            "agent_step_started": self._agent_step,
            "engine_counters": self._counters,
            "error": self._error,
        }
        self.reset()

    def reset(self) -> None:
        """Forget everything (a replay that rewinds)."""
        self._scopes: dict[str | None, _Scope] = {}
        self._requests: dict[str, _Request] = {}
        self._peers: dict[tuple[str | None, str], list[float]] = {}
        self._asked: dict[str, str] = {}

    def feed(self, event: BaseEvent) -> tuple[Finding, ...] | list[Finding]:
        handler = self._handlers.get(event.type)
        return _NONE if handler is None else handler(event)

    # -- bookkeeping -------------------------------------------------------------------------------

    def _scope(self, lane: str | None) -> _Scope:
        scope = self._scopes.get(lane)
        if scope is None:
            scope = self._scopes[lane] = _Scope()
        return scope

    def _request(self, request_id: str, lane: str | None, kind: str = "text", prompt_tokens: int = 0) -> _Request:
        req = self._requests.get(request_id)
        if req is None:
            th = self.thresholds
            req = self._requests[request_id] = _Request(th.loop_tokens + th.loop_max_period, kind, prompt_tokens)
        return req

    def _asked_text(self, event: Any) -> tuple[Finding, ...]:
        if len(self._asked) >= _MAX_ASKED:
            self._asked.clear()
        self._asked[event.request_id] = event.text
        return _NONE

    def _agent_step(self, event: Any) -> tuple[Finding, ...]:
        # An agent's generation requests start right after their step: its kind is theirs.
        self._scope(event.lane).agent_kind = event.kind
        return _NONE

    def _started(self, event: Any) -> tuple[Finding, ...]:
        scope = self._scope(event.lane)
        kind = scope.agent_kind or ("json" if event.params.get("json_schema") else "text")
        scope.agent_kind = None
        self._requests.pop(event.request_id, None)
        self._request(event.request_id, event.lane, kind, event.prompt_tokens)
        return _NONE

    # -- per step: windows and latency ---------------------------------------------------------------

    def step(self, step: Any) -> tuple[Finding, ...] | list[Finding]:
        """``feed`` for a spec step, without the dispatch (a slim struct may have no ``type``)."""
        req = self._requests.get(step.request_id) or self._request(step.request_id, step.lane)
        req.tail.extend(step.tokens)
        scope = self._scopes.get(step.lane) or self._scope(step.lane)
        out = self._latency(scope, step)
        k = len(step.drafted)
        bad = step.invalid_drafts + step.dropped_drafts
        if k or bad:
            req.drafted += k
            req.accepted += step.accepted
            found = self._window(scope, step, k, bad)
            if found:
                out = [*out, *found]
        return out

    def _window(self, sc: _Scope, step: Any, k: int, bad: int) -> list[Finding] | None:
        th = self.thresholds
        a, ntok = step.accepted, len(step.tokens)
        passes = step.draft_passes if step.draft_passes is not None else k + step.invalid_drafts
        sc.win.append((k, a, bad, passes, ntok))
        sc.wk += k
        sc.wa += a
        sc.wbad += bad
        sc.wpass += passes
        sc.wtok += ntok
        if len(sc.win) <= th.window:
            if len(sc.win) < th.window:
                return None
        else:
            ok, oa, obad, opass, otok = sc.win.popleft()
            sc.wk -= ok
            sc.wa -= oa
            sc.wbad -= obad
            sc.wpass -= opass
            sc.wtok -= otok
            if not sc.collapse:  # the baseline stays what acceptance was before the collapse
                sc.bsteps += 1
                sc.bk += ok
                sc.ba += oa
                sc.bpass += opass
                sc.btok += otok
        found: list[Finding] = []
        slots = sc.wk + sc.wbad
        share = sc.wbad / slots if slots else 0.0
        if not sc.invalid and share >= th.invalid_share:
            sc.invalid = True
            found.append(self._invalid_finding(step, share, slots))
        elif sc.invalid and share < th.invalid_share / 2:
            sc.invalid = False
        if sc.bsteps < th.baseline_steps or not sc.bk or not sc.wk:
            return found
        base, rate = sc.ba / sc.bk, sc.wa / sc.wk
        if not sc.collapse and rate < base * th.collapse_ratio:
            sc.collapse = True
            found.append(
                Finding(
                    t=step.t,
                    lane=step.lane,
                    kind="collapse",
                    request_id=step.request_id,
                    message=f"acceptance collapsed: {rate:.0%} over the last {len(sc.win)} drafting steps "
                    f"against {base:.0%} before (the draft may not fit what is asked now)",
                    evidence={"window_rate": rate, "baseline_rate": base, "window_steps": len(sc.win)},
                )
            )
        elif sc.collapse and rate >= base * th.recover_ratio:
            sc.collapse = False
        if sc.btok and sc.wtok:
            base_ppt, ppt = sc.bpass / sc.btok, sc.wpass / sc.wtok
            # Per token, passes rise whenever acceptance falls: reported only while acceptance holds,
            # so what is left is the draft's own cost (grammar drafting skipping fewer passes).
            holds = rate >= base * th.recover_ratio
            if not sc.passes and holds and ppt > base_ppt * th.passes_ratio:
                sc.passes = True
                found.append(
                    Finding(
                        t=step.t,
                        lane=step.lane,
                        kind="draft_passes",
                        request_id=step.request_id,
                        message=f"draft passes per token rose to {ppt:.2f} over the last {len(sc.win)} "
                        f"drafting steps, from {base_ppt:.2f}",
                        evidence={"window_passes_per_token": ppt, "baseline_passes_per_token": base_ppt},
                    )
                )
            elif sc.passes and ppt <= base_ppt * (1 + th.passes_ratio) / 2:
                sc.passes = False
        return found

    def _invalid_finding(self, step: Any, share: float, slots: int) -> Finding:
        return Finding(
            t=step.t,
            lane=step.lane,
            kind="invalid_drafts",
            request_id=step.request_id,
            message=f"the grammar threw away {share:.0%} of {slots} draft slots over the last "
            f"{self.thresholds.window} drafting steps (drafts the schema forbids)",
            evidence={"invalid_share": share, "slots": slots},
        )

    def _latency(self, sc: _Scope, step: Any) -> tuple[Finding, ...]:
        """A decode step far above the running median. The first step of a request is its prefill,
        and an engine step that prefills one request is slow for every request in it; its decode
        steps come first in the stream (the sample sessions show the order), all with the engine
        step's wall time. So a spike is held until the next step of a later engine step (another
        wall time) and dropped when a prefill of its own engine step follows it; decode steps given
        after such a prefill are not candidates at all. A burst of new requests is not a spike. A held spike shows one step late, and one in the very last engine
        step of a stream is not reported."""
        th, wall, median = self.thresholds, step.wall_s, sc.median
        out: tuple[Finding, ...] = _NONE
        held = sc.held
        if held is not None and wall != held.evidence["wall_s"]:  # reported now, in stream order
            sc.held, out = None, (held.model_copy(update={"t": step.t}),)
        if not step.index:  # a prefill: nothing to compare, and it clears its engine step's spike
            sc.prefill_wall = wall
            if sc.held is not None:  # still held: the spike was this engine step's
                sc.held, sc.spiking = None, False
            return out
        if median is not None and wall > median * th.spike_ratio and wall - median >= th.spike_min_s:
            if sc.spiking or wall == sc.prefill_wall:
                return out  # the same run of slow steps (a batch's requests share one engine step)
            sc.spiking = True
            sc.held = Finding(
                t=step.t,
                lane=step.lane,
                kind="latency_spike",
                request_id=step.request_id,
                message=f"step {step.index} of {step.request_id} took {wall * 1e3:.0f} ms, "
                f"{wall / median if median else float('inf'):.0f}× the running median of "
                f"{median * 1e3:.1f} ms (preemption, swapping, a recompile?)",
                evidence={"wall_s": wall, "median_s": median},
            )
            return out
        sc.spiking = False  # a spike is kept out of the median it is measured against
        sc.ring.append(wall)
        sc.decode_steps += 1
        n = sc.decode_steps
        if n >= th.spike_warmup and (median is None or n % _MEDIAN_EVERY == 0):
            ring = sorted(sc.ring)
            sc.median = ring[len(ring) // 2]
        return out

    # -- per request: outliers and loops ----------------------------------------------------------------

    def _finished(self, event: Any) -> tuple[Finding, ...] | list[Finding]:
        req = self._requests.pop(event.request_id, None)
        if req is None or event.cancelled:
            return _NONE
        found: list[Finding] = []
        if event.finish_reason == "length":
            loop = self._loop(event, req)
            if loop is not None:
                found.append(loop)
        if req.drafted >= self.thresholds.outlier_draft_tokens:
            outlier = self._outlier(event, req)
            if outlier is not None:
                found.append(outlier)
        return found

    def _loop(self, event: Any, req: _Request) -> Finding | None:
        th = self.thresholds
        tokens = list(req.tail)
        ids = [t.id for t in tokens]
        n = len(ids)
        for period in range(1, min(th.loop_max_period, n // 2) + 1):
            i = n - 1
            while i >= period and ids[i] == ids[i - period]:
                i -= 1
            span = n - 1 - i + period
            if span >= th.loop_tokens:
                piece = "".join(t.text for t in tokens[-period:])
                rate = req.accepted / req.drafted if req.drafted else None
                evidence = {"period": float(period), "tokens": float(span)}
                if rate is not None:
                    evidence["acceptance_rate"] = rate
                return Finding(
                    t=event.t,
                    lane=event.lane,
                    kind="loop",
                    request_id=event.request_id,
                    message=f"{event.request_id} hit its length limit inside a loop: {piece!r} "
                    f"({period} token{'s' if period > 1 else ''}) repeated over its last {span} tokens"
                    + (f", acceptance {rate:.0%}" if rate is not None else ""),
                    evidence=evidence,
                )
        return None

    def _outlier(self, event: Any, req: _Request) -> Finding | None:
        th = self.thresholds
        rate = req.accepted / req.drafted
        key = (event.lane, req.kind)
        peers = self._peers.get(key)
        if peers is None:
            peers = self._peers[key] = [0, 0.0]
        n, total = peers
        peers[0], peers[1] = n + 1, total + rate
        if n < th.outlier_peers:
            return None
        mean = total / n
        if not (rate < mean * th.outlier_ratio and mean - rate >= th.outlier_gap):
            return None
        rid = event.request_id
        asked = self._asked.get(rid) or self._asked.get(rid.rsplit("-", 1)[0])
        what = f'asked: "{asked[:120]}"' if asked else f"a {req.prompt_tokens}-token prompt"
        return Finding(
            t=event.t,
            lane=event.lane,
            kind="outlier",
            request_id=rid,
            message=f"{rid} accepted {rate:.0%} of its drafts against {mean:.0%} over {n} earlier "
            f"{req.kind} requests; {what}",
            evidence={"acceptance_rate": rate, "peer_rate": mean, "peers": float(n), "draft_tokens": req.drafted},
        )

    # -- reconciliation ---------------------------------------------------------------------------------

    def _counters(self, event: Any) -> tuple[Finding, ...]:
        if event.matched:
            return _NONE
        return (
            Finding(
                t=event.t,
                lane=event.lane,
                kind="mismatch",
                severity="error",
                request_id=event.request_id,
                message=f"{event.request_id}: specterm's verdicts do not reconcile with vLLM: {event.detail}",
                evidence={k: float(v) for k, v in event.vllm.items() if isinstance(v, (int, float))},
            ),
        )

    def _error(self, event: Any) -> tuple[Finding, ...]:
        # "reconcile" warnings come with an unmatched EngineCounters (one finding, there); "verdicts"
        # says the emitted ids are not what the target sampled: the verdicts themselves are wrong.
        if event.where != "verdicts":
            return _NONE
        return (
            Finding(
                t=event.t,
                lane=event.lane,
                kind="mismatch",
                severity="error",
                request_id=event.request_id,
                message=event.message,
            ),
        )


def diagnosing(sink: Sink, diagnoser: Diagnoser) -> Sink:
    """``sink`` behind ``diagnoser``: each event is handed on, then the findings it completes.

    A finding arriving from upstream (a recording replayed) is dropped: the diagnoser recomputes
    the session's findings from its events, with today's thresholds, so none is shown twice."""
    feed = diagnoser.feed

    def out(event: BaseEvent) -> None:
        if event.type == "finding":
            return
        sink(event)
        for finding in feed(event):
            sink(finding)

    return out
