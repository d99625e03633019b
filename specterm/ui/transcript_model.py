"""Events → transcript entries. Pure state, no widgets, so the mapping is testable on its own.

Mapping (the agent emits ``agent_step_started`` before the step's engine request, if any):

* ``user_message`` → a "you" block;
* ``agent_step_started`` → a block for that step; its engine request (``request_started`` /
  ``spec_step`` while the step is open) streams its tokens into it;
* ``spec_step`` outside any agent step (plain chat without an agent) → a "generation" block;
* ``tool_call`` / ``retrieval`` / ``tool_result`` → lines in their step's block (a new block if the
  step is unknown);
* ``agent_step_finished`` / ``request_finished`` → the block's footer (time, TTFT, tokens, tok/s);
* ``engine_counters`` that disagree with vLLM, ``error`` and ``session_ended`` → visible lines.
"""

from __future__ import annotations

from specterm.events import (
    AgentStepFinished,
    AgentStepStarted,
    BaseEvent,
    EngineCounters,
    Error,
    RequestFinished,
    RequestStarted,
    Retrieval,
    SessionEnded,
    SpecStep,
    ToolCall,
    ToolResult,
    UserMessage,
)
from specterm.ui.entries import Entry, _cut, json_compact, step_footer

# Any agent step may run an engine request (even "tool" or "retrieve", e.g. to rewrite a query);
# whichever step is open when a request starts owns its tokens.
GENERATING_KINDS = {"validate", "retrieve", "tool_call", "tool", "answer", "generation"}


class TranscriptModel:
    def __init__(self) -> None:
        self.entries: list[Entry] = []
        self.pending: list[Entry] = []
        """Entries created since the widget last took them (to be mounted)."""
        self.dirty: set[int] = set()
        """ids of entries changed since the widget last rendered."""
        self._by_request: dict[str, Entry] = {}
        self._by_step: dict[tuple[str, int], Entry] = {}
        self._current: Entry | None = None
        self._bound: set[int] = set()
        self.last_answer: str = ""

    # -- helpers --------------------------------------------------------------------------------

    def _new(self, entry: Entry) -> Entry:
        self.entries.append(entry)
        self.pending.append(entry)
        return entry

    def _changed(self, entry: Entry) -> None:
        entry.touch()
        self.dirty.add(id(entry))

    def _for_request(self, request_id: str) -> Entry:
        entry = self._by_request.get(request_id)
        if entry is not None:
            return entry
        cur = self._current
        # Bind the request to the open agent step that generates, unless another request already
        # streamed into it (then this is a separate generation).
        if cur is not None and cur.open and cur.kind in GENERATING_KINDS and id(cur) not in self._bound:
            entry = cur
        else:
            entry = self._new(Entry("generation", request_id=request_id))
            self._current = entry
        self._bound.add(id(entry))
        self._by_request[request_id] = entry
        return entry

    def _for_step(self, request_id: str, step: int, kind: str) -> Entry:
        entry = self._by_step.get((request_id, step))
        if entry is None:
            entry = self._new(Entry(kind, request_id=request_id, step=step))
            self._by_step[(request_id, step)] = entry
        return entry

    # -- the mapping ----------------------------------------------------------------------------

    def add(self, ev: BaseEvent) -> None:
        if isinstance(ev, SpecStep):
            entry = self._for_request(ev.request_id)
            entry.tokens().add(ev)
            self._changed(entry)
        elif isinstance(ev, UserMessage):
            entry = self._new(Entry("user"))
            entry.add_line(ev.text)
            self._current = None
        elif isinstance(ev, AgentStepStarted):
            entry = self._for_step(ev.request_id, ev.step, ev.kind)
            entry.title = f"step {ev.step} · {ev.kind.replace('_', ' ')}"
            self._current = entry
            self._changed(entry)
        elif isinstance(ev, RequestStarted):
            entry = self._for_request(ev.request_id)
            if ev.conversation:  # an attached server's request: which client conversation, which step
                late = " (joined mid-request)" if ev.params.get("joined_late") else ""
                entry.title = (
                    f"conversation {ev.conversation} · step {ev.turn} · {ev.prompt_tokens} prompt "
                    f"tokens · {ev.request_id}{late}"
                )
                self._changed(entry)
        elif isinstance(ev, AgentStepFinished):
            entry = self._for_step(ev.request_id, ev.step, ev.kind)
            entry.footer = step_footer(ev.latency_s, ev.ttft_s, ev.tokens, ev.ok)
            entry.footer_style = "meta" if ev.ok else "error"
            entry.open = False
            if ev.answer is not None:  # the agent's answer itself, not the JSON it was written in
                self.last_answer = ev.answer
                entry.answer = ev.answer
                entry.title = f"step {ev.step} · answer"  # what the step did, whatever it was generated as
                if ev.withheld is not None:
                    entry.add_line(
                        ev.withheld + f"  ({', '.join(ev.ungrounded or [])} in no tool result)",
                        "warning",
                        "⚠ withheld, the model's answer: ",
                    )
                elif ev.ungrounded:
                    entry.add_line(
                        ", ".join(ev.ungrounded) + " (in no tool result of this turn)", "warning", "⚠ ungrounded: "
                    )
            elif ev.kind == "answer":
                self.last_answer = entry.final_text or entry.plain_output() or self.last_answer
            self._changed(entry)
        elif isinstance(ev, RequestFinished):
            entry = self._by_request.get(ev.request_id)
            if entry is None:
                return
            if ev.cancelled:
                entry.add_line("cancelled", "warning", "■ ")
            if entry.kind == "generation":
                entry.footer = step_footer(ev.wall_s, ev.ttft_s, ev.output_tokens, not ev.cancelled)
                if ev.cached_tokens:
                    entry.footer += f" · {ev.cached_tokens} prompt tokens cached"
                entry.open = False
            entry.final_text = ev.text
            if entry.kind in ("generation", "answer"):
                self.last_answer = ev.text or entry.plain_output() or self.last_answer
            self._changed(entry)
        elif isinstance(ev, ToolCall):
            entry = self._for_step(ev.request_id, ev.step, "tool_call")
            entry.add_line(f"{ev.name}({json_compact(ev.arguments)})", "tool", "→ call ")
            self._changed(entry)
        elif isinstance(ev, ToolResult):
            entry = self._by_step.get((ev.request_id, ev.step)) or self._for_step(ev.request_id, ev.step, "tool")
            if ev.ok:
                more = " (truncated)" if ev.truncated else ""
                entry.add_line(_cut(ev.content) + more, "body", f"← {ev.name}: ")
            else:
                entry.add_line(ev.error or ev.content or "failed", "error", f"← {ev.name} failed: ")
            self._changed(entry)
        elif isinstance(ev, Retrieval):
            entry = self._by_step.get((ev.request_id, ev.step)) or self._for_step(ev.request_id, ev.step, "retrieve")
            entry.add_line(ev.query, "tool", "query: ")
            for p in ev.passages:
                entry.add_line(_cut(p.text, 300), "body", f"  {p.doc} ({p.score:.2f}) ")
            self._changed(entry)
        elif isinstance(ev, EngineCounters):
            if not ev.matched:
                entry = self._by_request.get(ev.request_id) or self._new(Entry("warning"))
                entry.add_line(ev.detail or "specterm's counts differ from vLLM's", "warning", "⚠ counters: ")
                self._changed(entry)
        elif isinstance(ev, Error):
            entry = self._new(Entry(ev.level))
            where = f"{ev.where}: " if ev.where else ""
            entry.add_line(where + ev.message, ev.level)
        elif isinstance(ev, SessionEnded):
            entry = self._new(Entry("end"))
            entry.add_line(f"session ended ({ev.reason})", "meta")
            self._current = None

    def entry_for(self, request_id: str) -> Entry | None:
        return self._by_request.get(request_id)

    def take_pending(self) -> list[Entry]:
        out, self.pending = self.pending, []
        return out

    def take_dirty(self) -> set[int]:
        out, self.dirty = self.dirty, set()
        return out
