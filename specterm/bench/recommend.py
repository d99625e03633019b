"""``specterm bench --recommend``: pick the fastest configuration a bench measured, and keep it.

The choice: each speculative configuration's decode speed-up over target-only (the bench's own
paired, interleaved ratio, ``results.py``), combined over the benched workloads by geometric mean so
that no single workload dominates. The best one wins if it beats target-only; if none does, the
recommendation is *no speculation* (``method = "none"``): on some pairs and machines the draft costs
more than it saves (README, Performance), and saying so is the point of measuring.

It is written to the config file: ``[engine]`` gets the target, draft, method and k it was measured
with (so the next ``chat``/``run``/``agent`` uses it), and a ``[recommendation]`` table says what
was measured: the expected speed-up, every candidate's, and the target-only decode rate it is
relative to. ``chat`` passes a recommendation that matches the running engine to the dashboard in
the session header (``SessionStarted.config["recommendation"]``), which shows the expected speed-up
next to the live one (``stats.SessionSummary.decode_tokens_per_s`` ÷ that target-only rate).

The file is edited with tomlkit, so the user's comments, keys and order survive; it is replaced
atomically, so an interrupted write loses nothing.
"""

from __future__ import annotations

import datetime
import math
import os
import tempfile
import tomllib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError, model_validator

from specterm.bench.results import ConfigResult
from specterm.bench.runner import GRAMMAR_SUFFIX
from specterm.engine.base import EngineConfig
from specterm.errors import ConfigError

NO_SPECULATION = "none"


class Recommendation(BaseModel):
    target: str
    draft: str | None = None
    method: str
    """A speculation method, or ``"none"``: nothing measured beat target-only."""
    k: int = 0
    speedup: float
    """Expected decode speed-up over target-only (geometric mean over ``workloads``; 1.0 for none)."""
    target_only_tok_s: float | None = None
    """Target-only decode tokens/s in that bench (geometric mean over ``workloads``)."""
    workloads: list[str]
    candidates: dict[str, float]
    """Every measured configuration's speed-up (its label → geometric mean)."""
    measured: str
    """When (ISO 8601)."""
    concurrency: int = 1
    """The load it was measured for: requests in flight (``bench --concurrency``; 1 for a plain bench)."""
    per_load: dict[str, str] | None = None
    """``bench --concurrency``: the winner at each level measured (level → label, or "none")."""
    speculation_off_from: int | None = None
    """``bench --concurrency``: the lowest level from which nothing beats target-only; None if never."""

    spec_schedule: list[tuple[int, int, int]] | None = None
    """``bench --concurrency --recommend``: k per batch size (``bench/schedule.py``), ``k`` its largest;
    written to ``[engine]`` so the next engine runs it through vLLM's own mechanism."""

    grammar_drafting: bool | None = None
    """``draft_model``: whether the winner drafted under the grammar (bench's ``draft_model+grammar``);
    written to the config with the method. ``None``: not a draft-model winner."""

    @model_validator(mode="before")
    @classmethod
    def _split_grammar(cls, data: Any) -> Any:
        """A bench label's ``draft_model+grammar`` is method ``draft_model`` with grammar drafting."""
        if isinstance(data, dict) and str(data.get("method", "")).endswith(GRAMMAR_SUFFIX):
            data = {**data, "method": data["method"].removesuffix(GRAMMAR_SUFFIX), "grammar_drafting": True}
        return data

    @property
    def label(self) -> str:
        if self.method == NO_SPECULATION:
            return "no speculation"
        name = f"{self.method}{GRAMMAR_SUFFIX if self.grammar_drafting else ''}"
        if self.spec_schedule:
            return f"{name} schedule {[list(r) for r in self.spec_schedule]}"
        return f"{name} k={self.k}"

    def matches(self, config: EngineConfig) -> bool:
        """Measured on this engine's pair, method and k (a different k or pair expects something else)."""
        method = config.method or NO_SPECULATION
        same_k = method == NO_SPECULATION or config.num_speculative_tokens == self.k
        draft_matters = config.method == "draft_model"
        same_grammar = self.grammar_drafting is None or config.drafts_with_grammar == self.grammar_drafting
        return (
            config.target == self.target
            and method == self.method
            and same_k
            and (config.spec_schedule or None) == (self.spec_schedule or None)
            and same_grammar
            and (not draft_matters or config.draft == self.draft)
        )


def _geomean(values: Sequence[float]) -> float:
    return math.exp(sum(math.log(v) for v in values) / len(values))


def choose(per_workload: Mapping[str, Sequence[ConfigResult]], base: EngineConfig) -> Recommendation:
    """The fastest configuration over all the workloads benched (see the module docstring)."""
    speedups: dict[str, list[float]] = {}
    by_label: dict[str, ConfigResult] = {}
    target_rates: list[float] = []
    for results in per_workload.values():
        for r in results:
            if r.method is None:
                if r.tokens_per_s is not None and r.tokens_per_s.median > 0:
                    target_rates.append(r.tokens_per_s.median)
            elif r.speedup is not None and r.speedup.median > 0:
                speedups.setdefault(r.label, []).append(r.speedup.median)
                by_label[r.label] = r
    # A configuration missing a workload (no decode time there) cannot be compared fairly.
    complete = {label: _geomean(v) for label, v in speedups.items() if len(v) == len(per_workload)}
    best = max(complete, key=complete.__getitem__, default=None)
    common: dict[str, Any] = {
        "target": base.target,
        "draft": base.draft,
        "workloads": list(per_workload),
        "candidates": {label: round(v, 3) for label, v in complete.items()},
        "target_only_tok_s": round(_geomean(target_rates), 2) if target_rates else None,
        "measured": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
    }
    if best is None or complete[best] <= 1.0:
        return Recommendation(method=NO_SPECULATION, k=0, speedup=1.0, **common)
    win = by_label[best]
    if win.method != "draft_model":
        common["draft"] = None
    compared = any(r.grammar for results in per_workload.values() for r in results)
    if win.method == "draft_model" and compared:  # only a comparison decides grammar drafting
        common["grammar_drafting"] = win.grammar
    return Recommendation(method=win.method or NO_SPECULATION, k=win.k, speedup=round(complete[best], 3), **common)


def write(path: Path, rec: Recommendation) -> None:
    """Put ``rec`` into the config file at ``path`` (created if missing); one-line ``ConfigError``
    when the file cannot be read, parsed or written (and then it is left as it was)."""
    import tomlkit
    from tomlkit.exceptions import TOMLKitError

    path = Path(path)
    try:
        doc = tomlkit.parse(path.read_text(encoding="utf-8")) if path.exists() else tomlkit.document()
    except (OSError, UnicodeDecodeError, TOMLKitError) as err:
        raise ConfigError(f"cannot update config file {path}: {err}") from None
    engine = doc.get("engine")
    if engine is None:
        engine = doc["engine"] = tomlkit.table()
    elif not isinstance(engine, dict):
        raise ConfigError(f"cannot update config file {path}: [engine] is not a table")
    engine["target"] = rec.target
    if rec.draft:
        engine["draft"] = rec.draft
    engine["method"] = rec.method
    if rec.method != NO_SPECULATION:
        engine["num_speculative_tokens"] = rec.k
    if rec.spec_schedule is not None:
        engine["spec_schedule"] = [list(r) for r in rec.spec_schedule]
    elif "spec_schedule" in engine:  # a fixed k measured now replaces an older schedule
        del engine["spec_schedule"]
    if rec.grammar_drafting is not None:
        engine["grammar_drafting"] = rec.grammar_drafting
    doc["recommendation"] = rec.model_dump(exclude_none=True)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".config-", suffix=".toml")
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(tomlkit.dumps(doc))
        os.replace(tmp, path)
    except OSError as err:
        raise ConfigError(f"cannot write config file {path}: {err.strerror or err}") from None


def read(path: Path) -> Recommendation | None:
    """The file's ``[recommendation]``, or None when there is none or it is unreadable (a stale or
    hand-edited recommendation must never stop ``chat`` from starting; ``bench --recommend`` rewrites it)."""
    try:
        data = tomllib.loads(Path(path).read_text(encoding="utf-8"))
        raw = data.get("recommendation")
        return Recommendation.model_validate(raw) if isinstance(raw, dict) else None
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError, ValidationError):
        return None


def for_engine(config: EngineConfig) -> Recommendation | None:
    """The config file's recommendation if it was measured on exactly this engine configuration."""
    from specterm.paths import config_file

    rec = read(config_file())
    return rec if rec is not None and rec.matches(config) else None
