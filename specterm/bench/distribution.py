"""Does speculative sampling follow the target's distribution? A two-sample test of exactly that.

Rejection sampling promises that every token a speculative engine emits at temperature T is
distributed as the target alone would sample it at T (Leviathan et al. 2023, Theorem 1; Chen et al.
2023). Acceptance rates cannot show a violation (a sampler that always accepts has a great one);
the output distribution can. So: draw ``n`` seeded samples of the first few tokens after one prompt
from the speculative engine and ``n`` from the target-only engine (disjoint seeds, so the samples are
independent), and for each position test "same categorical distribution" with Pearson's chi-square
test of homogeneity (``scipy.stats.chi2_contingency``). Tokens seen fewer than ``MIN_EXPECTED``
times in total are pooled into one category so the chi-square approximation holds.

Position 1 comes from the prefill (no draft yet) and acts as a control; positions ≥ 2 pass through
draft verification, acceptance and the recovered (corrected) token sampling.

**False failures**: with a correct sampler each p-value is uniform on [0, 1], so a check with
``positions`` tests at ``alpha`` each fails a correct backend with probability ≤ positions × alpha
(Bonferroni): 3 × 0.001 = 0.3 % per temperature with the defaults. The samples are seeded, so a given
build and machine gives the same answer every run.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

ALPHA = 0.001
MIN_EXPECTED = 5


@dataclass(frozen=True)
class PositionTest:
    position: int
    """1-based token position after the prompt."""
    chi2: float
    dof: int
    p_value: float
    categories: int
    top_spec: list[tuple[int, int]]
    """The most frequent tokens in the speculative samples: (token id, count)."""
    top_target: list[tuple[int, int]]


@dataclass(frozen=True)
class DistributionCheck:
    temperature: float
    n: int
    alpha: float
    tests: list[PositionTest]

    @property
    def ok(self) -> bool:
        return all(t.p_value >= self.alpha for t in self.tests)

    def describe(self) -> str:
        ps = ", ".join(f"pos {t.position}: χ²={t.chi2:.1f} (dof {t.dof}) p={t.p_value:.3g}" for t in self.tests)
        return f"T={self.temperature:g}, {self.n} + {self.n} samples: {ps}"


def position_test(position: int, spec: Sequence[int], target: Sequence[int]) -> PositionTest:
    """Chi-square test of homogeneity for one position's tokens (rare tokens pooled)."""
    from scipy.stats import chi2_contingency

    cs, ct = Counter(spec), Counter(target)
    total = cs + ct
    # Expected count of a token in either sample is about total/2; keep those with ≥ MIN_EXPECTED.
    keep = sorted(tok for tok, c in total.items() if c / 2 >= MIN_EXPECTED)
    rows = [[cs[tok] for tok in keep], [ct[tok] for tok in keep]]
    rest_s, rest_t = len(spec) - sum(rows[0]), len(target) - sum(rows[1])
    if rest_s + rest_t > 0:
        rows[0].append(rest_s)
        rows[1].append(rest_t)
    top = (cs.most_common(5), ct.most_common(5))
    if len(rows[0]) < 2:  # one category: both samples are the same constant token (or both pooled)
        same = rows[0][0] == len(spec) and rows[1][0] == len(target)
        return PositionTest(position, 0.0, 0, 1.0 if same else 0.0, len(rows[0]), *top)
    result = chi2_contingency(rows, correction=False)
    return PositionTest(position, float(result.statistic), int(result.dof), float(result.pvalue), len(rows[0]), *top)


def compare(
    spec: Sequence[Sequence[int]],
    target: Sequence[Sequence[int]],
    *,
    temperature: float,
    positions: int = 3,
    alpha: float = ALPHA,
) -> DistributionCheck:
    tests = [
        position_test(i + 1, [s[i] for s in spec if len(s) > i], [s[i] for s in target if len(s) > i])
        for i in range(positions)
    ]
    return DistributionCheck(temperature, len(spec), alpha, tests)


def run_distribution_check(
    spec_engine,
    target_engine,
    prompt: str,
    *,
    temperature: float,
    n: int = 2000,
    positions: int = 3,
    alpha: float = ALPHA,
    json_schema: dict[str, Any] | None = None,
) -> DistributionCheck:
    """Sample both engines (``VllmSpecEngine.sample_token_ids``) and compare them position by position;
    ``json_schema`` constrains both (structured outputs, grammar drafting)."""
    extra = {"json_schema": json_schema} if json_schema else {}
    spec = spec_engine.sample_token_ids(prompt, n=n, temperature=temperature, max_tokens=positions, seed0=0, **extra)
    target = target_engine.sample_token_ids(
        prompt, n=n, temperature=temperature, max_tokens=positions, seed0=10_000_000, **extra
    )
    return compare(spec, target, temperature=temperature, positions=positions, alpha=alpha)
