"""The detectors' thresholds: the ``[diagnose]`` table of the config file (``specterm.config``).

Every value has a range; a value outside it is a one-line error naming the key. The defaults were
chosen against the shipped sample sessions and spliced faults (``docs/diagnose.md``): each is far
enough from what a healthy recorded session shows that none of them flags anything there.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class Thresholds(BaseModel):
    # forbid: a misspelt key in [diagnose] is an error, not a threshold silently left at its default
    model_config = ConfigDict(extra="forbid", frozen=True)

    window: int = Field(64, ge=8, le=100_000)
    """Drafting steps in the rolling window (acceptance collapse, grammar-invalid drafts, passes)."""
    baseline_steps: int = Field(256, ge=1, le=10_000_000)
    """Drafting steps older than the window needed before the window is compared with them."""
    collapse_ratio: float = Field(0.5, gt=0, lt=1)
    """A collapse: the window's acceptance below this fraction of the baseline's."""
    recover_ratio: float = Field(0.8, gt=0, le=1)
    """The episode ends when the window is back above this fraction of the baseline."""
    outlier_peers: int = Field(5, ge=1, le=100_000)
    """Finished requests of the same kind needed before a request is compared with them."""
    outlier_draft_tokens: int = Field(16, ge=1)
    """Draft tokens a request needs before its acceptance is judged."""
    outlier_ratio: float = Field(0.5, gt=0, lt=1)
    """An outlier: acceptance below this fraction of its peers' mean ..."""
    outlier_gap: float = Field(0.2, gt=0, le=1)
    """... and at least this far below it (absolute), so 2 % against 4 % is no outlier."""
    loop_max_period: int = Field(8, ge=1, le=64)
    """Longest repeating period (tokens) a degenerate loop may have."""
    loop_tokens: int = Field(32, ge=4, le=4096)
    """Tokens the periodic tail must span before a request cut at its length limit is a loop."""
    spike_ratio: float = Field(5.0, gt=1, le=1000)
    """A latency spike: a step this many times the running median of decode steps ..."""
    spike_min_s: float = Field(0.05, ge=0, le=3600)
    """... and at least this many seconds above it (a 1 ms step tripling is no spike)."""
    spike_warmup: int = Field(32, ge=4, le=100_000)
    """Decode steps seen before the median is trusted."""
    invalid_share: float = Field(0.25, gt=0, le=1)
    """Grammar-invalid drafts: the share of draft slots the grammar threw away, over the window."""
    passes_ratio: float = Field(1.5, gt=1, le=100)
    """Draft passes per token rising: the window's above the baseline's by this factor."""
