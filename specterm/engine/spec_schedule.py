"""A batch-size schedule for speculation: vLLM's ``num_speculative_tokens_per_batch_size``.

A schedule is a list of inclusive ``(first, last, k)`` batch-size ranges: at every engine step vLLM's
scheduler counts the requests it scheduled and drafts k tokens for each (k = 0: no speculation for
that batch size), k capped by ``num_speculative_tokens``. vLLM 0.32 owns the mechanism; this module
only reads a schedule (JSON text or a JSON file: the ``--spec-schedule`` flag, the config file's
``spec_schedule``) and checks it with vLLM's own validator, so a schedule specterm accepts is one
vLLM accepts. Each problem is one line (``ConfigError``).

What vLLM accepts but would not do as written is refused too: a k above ``num_speculative_tokens``
(vLLM silently caps it), a schedule without speculation (method none has no k), and data
parallelism (vLLM then drops the schedule with a warning: ``config/vllm.py``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from specterm.errors import ConfigError

Schedule = list[tuple[int, int, int]]


def parse(value: Any) -> Any:
    """JSON text, a JSON file's path, or an already-parsed list → the raw list (checked by ``validate``)."""
    if not isinstance(value, str):
        return value
    text = value.strip()
    source = "--spec-schedule"
    if not text.startswith("["):
        path = Path(text).expanduser()
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as err:
            raise ConfigError(
                f"spec schedule {value!r} is neither JSON nor a readable file: {err.strerror or err}"
            ) from None
        source = str(path)
    try:
        return json.loads(text)
    except json.JSONDecodeError as err:
        raise ConfigError(f"spec schedule from {source} is not JSON: {err.msg} (line {err.lineno})") from None


def validate(raw: Any) -> Schedule:
    """vLLM's own validator (sorted, non-overlapping, positive, first range at 1, k >= 0)."""
    from specterm.engine.installs import vllm_build
    from specterm.engine.vllm_internals import validate_sd_schedule

    if vllm_build() is None:  # no engine installed: nothing to run it on, and no validator to ask
        raise ConfigError("a spec schedule needs the vLLM engine, which is not installed")
    # Safe before the engine sets vLLM's environment: this module configures no logging and caches
    # no environment (checked: vLLM's logger has no handler after importing it).
    try:
        return validate_sd_schedule(raw)
    except (ValueError, TypeError) as err:
        raise ConfigError(f"bad spec schedule {json.dumps(raw)}: {err}") from None


def check_for(schedule: Schedule, *, method: str | None, k_max: int, data_parallel_size: int = 1) -> None:
    """What vLLM would accept but not do as written (module doc), one line each."""
    if method is None:
        raise ConfigError("a spec schedule needs speculation: method none has no k (drop --no-spec or the schedule)")
    top = max(k for _, _, k in schedule)
    if top > k_max:
        raise ConfigError(
            f"spec schedule k {top} is above num_speculative_tokens {k_max} (vLLM would cap it): pass -k {top}"
        )
    if data_parallel_size > 1:
        raise ConfigError(
            "vLLM ignores a spec schedule with data parallelism (its ranks could pick different k): "
            "drop data_parallel_size or the schedule"
        )


def lookup(schedule: Schedule, max_num_seqs: int, k_max: int) -> list[int]:
    """k for every batch size 1..max_num_seqs (index 0 unused), expanded exactly as vLLM's scheduler does."""
    from specterm.engine.vllm_internals import sd_schedule_lookup

    return sd_schedule_lookup(schedule, max_num_seqs, k_max)
