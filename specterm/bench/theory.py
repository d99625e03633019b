"""The speculative-decoding speed-up model of Leviathan et al. (2023), "Fast Inference from
Transformers via Speculative Decoding", and how specterm feeds it measured numbers.

Terms:

* **α** (alpha) — the per-token acceptance probability: the model assumes each draft token is
  accepted independently with probability α, given that all earlier ones were.
* **k** — draft tokens proposed per step (``num_speculative_tokens``).
* **c** — draft cost ratio: the time of one draft forward pass ÷ the time of one target forward
  pass (both as a full step). ``c = 0`` means drafting is free (n-gram lookup).

Under that model one step emits on average ``(1 − α^(k+1)) / (1 − α)`` tokens (the accepted prefix
plus the target's own token) and costs ``k·c + 1`` target-step times, so the expected speed-up over
target-only decoding is::

    S(α, k, c) = (1 − α^(k+1)) / ((1 − α) · (k·c + 1))

**How α comes from measured stats.** vLLM's *acceptance rate* (accepted ÷ drafted) is not α: under
the model its expectation is ``(α − α^(k+1)) / (k(1 − α))``, which is smaller. specterm instead solves
for the α at which the model's tokens per step equal the measured *mean acceptance length*
(``1 + accepted ÷ drafts``, from ``specterm.stats``). With that α the theory reproduces the measured
tokens per step exactly, so *measured ÷ theoretical* isolates cost: how much more (or less) a
speculative step really costs than ``k·c + 1`` target steps, plus non-step overhead (prefill,
scheduling, detokenisation) and steps that drafted nothing (n-gram misses).
"""

from __future__ import annotations

import math


def expected_tokens_per_step(alpha: float, k: int) -> float:
    """``(1 − α^(k+1)) / (1 − α)``: tokens one step emits on average; ``k + 1`` at α = 1."""
    _check(alpha, k)
    if alpha >= 1.0:
        return float(k + 1)  # the limit of the geometric sum; the closed form is 0/0 here
    return (1.0 - alpha ** (k + 1)) / (1.0 - alpha)


def theoretical_speedup(alpha: float, k: int, c: float) -> float:
    """Leviathan et al.'s expected wall-time speed-up ``S(α, k, c)`` over target-only decoding.

    ``k = 0`` is target-only (speed-up 1); ``α = 1`` gives ``(k + 1) / (k·c + 1)``.
    """
    if c < 0 or math.isnan(c):
        raise ValueError(f"draft cost ratio c must be >= 0, got {c}")
    return expected_tokens_per_step(alpha, k) / (k * c + 1.0)


def alpha_from_acceptance_length(mean_acceptance_length: float, k: int, *, tol: float = 1e-10) -> float:
    """The α whose expected tokens per step equals a measured mean acceptance length at this k.

    ``expected_tokens_per_step`` rises monotonically in α from 1 (α = 0) to k + 1 (α = 1), so a
    bisection finds the unique root; values outside [1, k + 1] are clamped to α = 0 or 1.
    """
    if k < 1:
        raise ValueError("alpha is undefined without drafts (k = 0)")
    if mean_acceptance_length <= 1.0:
        return 0.0
    if mean_acceptance_length >= k + 1:
        return 1.0
    lo, hi = 0.0, 1.0
    while hi - lo > tol:
        mid = (lo + hi) / 2
        if expected_tokens_per_step(mid, k) < mean_acceptance_length:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


def _check(alpha: float, k: int) -> None:
    if not 0.0 <= alpha <= 1.0:
        raise ValueError(f"alpha must be in [0, 1], got {alpha}")
    if k < 0:
        raise ValueError(f"k must be >= 0, got {k}")
