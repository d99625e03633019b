"""From ``bench --concurrency`` to a measured k for every batch size: a vLLM batch-size schedule.

vLLM 0.32 picks k at every engine step from the number of requests it scheduled in that step
(``num_speculative_tokens_per_batch_size``, ``engine/spec_schedule.py``). The bench measures by
*level* (requests the client keeps in flight), which is not that number: requests arrive, prefill
and finish at different steps, and the last ones of a run drain alone. So the ranges are built from
the batch sizes the steps actually had, as the verdict hook recorded them (``SpecStep.batch_size``):

1. **k per level**: one method (the one whose best k, or k = 0 where nothing beats target-only,
   gives the highest geometric-mean throughput ratio over the levels); at each level the k of its
   configuration with the highest throughput ratio there, or 0 (target-only) where none is above 1.
2. **Batch size per level**: the median batch size over every request-step recorded at that level
   (all configurations, target-only included): the batch a typical token of that level was made in.
   A level whose median is not above the previous level's adds nothing and is skipped (the lower
   level, measured first, keeps its k).
3. **Ranges**: each level's k covers the batch sizes nearer to its median than to a neighbour's:
   the boundary between two levels is the midpoint of their medians (rounded down, so it belongs to
   the lower level); the first range starts at 1, the last ends at the engine's ``max_num_seqs``.
   Adjacent ranges with the same k are merged.

E.g. levels 1, 2, 4, 8 with medians 1, 2, 4, 7 and best k 4, 2, 0, 0 give
``[[1, 1, 4], [2, 3, 2], [4, max_num_seqs, 0]]``. The result passes vLLM's own validator before
anyone sees it. Pure: plain numbers in, a schedule out; nothing here runs an engine.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from specterm.bench.load import LevelResult, LevelRun
from specterm.bench.runner import TARGET_ONLY
from specterm.engine.spec_schedule import Schedule, check_for, validate
from specterm.errors import ConfigError

MIN_LEVELS = 2


@dataclass(frozen=True)
class MeasuredSchedule:
    method: str
    """The bench label's method (``draft_model``, ``ngram``, ``draft_model+grammar`` ...)."""
    schedule: Schedule
    k_max: int
    """``num_speculative_tokens``: the largest k in the schedule (vLLM caps every k at it)."""
    levels: list[tuple[int, int, int]]
    """(level, median batch size, k) of each level used, for the report."""

    def describe(self) -> str:
        used = ", ".join(f"{lv} in flight → batch {b} → k {k}" for lv, b, k in self.levels)
        return f"{self.method} {[list(r) for r in self.schedule]} ({used})"


def batch_sizes(runs: Sequence[LevelRun]) -> dict[int, dict[int, int]]:
    """Level → batch size → request-steps, over every run (``SpecStats.by_k``; 0: not recorded)."""
    out: dict[int, dict[int, int]] = {}
    for run in runs:
        level = out.setdefault(run.level, {})
        for sizes in run.stats.by_k.values():
            for batch, n in sizes.items():
                level[batch] = level.get(batch, 0) + n
    return out


def _median(counts: Mapping[int, int]) -> int | None:
    known = sorted((b, n) for b, n in counts.items() if b > 0)
    total = sum(n for _, n in known)
    seen = 0
    for b, n in known:
        seen += n
        if 2 * seen >= total:
            return b
    return None


def _split(label: str) -> tuple[str, int] | None:
    method, sep, k = label.partition(" k=")
    return (method, int(k)) if sep and k.isdigit() else None


def _best_k(results: Sequence[LevelResult], method: str, level: int) -> tuple[int, float]:
    """(k, ratio) of ``method``'s fastest configuration at ``level``; (0, 1.0) if none beats target-only."""
    best = (0, 1.0)
    for r in results:
        split = _split(r.config)
        if r.level == level and split and split[0] == method and (r.ratio or 0) > best[1]:
            best = (split[1], r.ratio or 0.0)
    return best


def build(
    results: Sequence[LevelResult], sizes: Mapping[int, Mapping[int, int]], max_num_seqs: int
) -> MeasuredSchedule | None:
    """The schedule (module doc); ``None`` when speculation beats target-only at no level.
    One-line ``ConfigError`` for too few levels or a schedule vLLM would refuse."""
    levels = sorted({r.level for r in results})
    if len(levels) < MIN_LEVELS:
        raise ConfigError(
            f"a schedule needs at least {MIN_LEVELS} concurrency levels to tell batch sizes apart "
            f"(measured: {', '.join(map(str, levels)) or 'none'}): e.g. --concurrency 1,2,4,8"
        )
    methods = sorted({s[0] for r in results if r.config != TARGET_ONLY and (s := _split(r.config))})

    def score(method: str) -> float:
        return math.fsum(math.log(_best_k(results, method, lv)[1]) for lv in levels)

    method = max(methods, key=score, default=None)
    if method is None or score(method) <= 0.0:
        return None
    used: list[tuple[int, int, int]] = []
    for level in levels:
        batch = _median(sizes.get(level, {})) or level  # nothing recorded: the level itself
        if used and batch <= used[-1][1]:
            continue
        used.append((level, min(batch, max_num_seqs), _best_k(results, method, level)[0]))
    schedule: Schedule = []
    start = 1
    for i, (_, batch, k) in enumerate(used):
        end = max_num_seqs if i == len(used) - 1 else (batch + used[i + 1][1]) // 2
        end = max(end, start)
        if schedule and schedule[-1][2] == k:
            schedule[-1] = (schedule[-1][0], end, k)
        else:
            schedule.append((start, end, k))
        start = end + 1
        if start > max_num_seqs:
            break
    k_max = max(k for _, _, k in schedule)
    if k_max == 0:
        return None
    schedule = validate([list(r) for r in schedule])
    check_for(schedule, method=method, k_max=k_max)
    return MeasuredSchedule(method, schedule, k_max, used)
