"""The vLLM CPU build's T > 0 bug (vLLM issue 55005) and specterm's fix (``engine/vllm_patches``).

1. The expand check: ``expand_batch_to_tokens`` must spread per-request values over draft positions.
2. The distribution test: at T = 1 (and 0.7, which also catches float → int truncation of the
   temperature) the first tokens sampled with speculation follow the target-only distribution
   (chi-square over 2,000 seeded samples a side; false-failure rate ≤ 3 × 0.001 per temperature, see
   ``bench.distribution``), and the same test FAILS with vLLM's own function put back, so it has the
   power to see the bug it guards against.
"""

from __future__ import annotations

import pytest

from specterm.bench.distribution import compare, position_test

PROMPT = "The customer"


def test_chi_square_sees_equal_and_different_samples():
    same = position_test(2, [1] * 500 + [2] * 500, [1] * 490 + [2] * 510)
    assert same.p_value > 0.1
    differ = position_test(2, [1] * 700 + [2] * 300, [1] * 500 + [2] * 500)
    assert differ.p_value < 1e-6
    # Rare tokens are pooled: 40 singletons do not make 40 categories.
    pooled = position_test(1, [1] * 500 + list(range(100, 140)), [1] * 500 + list(range(200, 240)))
    assert pooled.categories == 2 and pooled.p_value > 0.1
    check = compare([[1, 1], [2, 2]] * 200, [[1, 2], [2, 1]] * 200, temperature=1.0, positions=2)
    assert check.tests[0].p_value > 0.5 and check.ok


@pytest.mark.engine
def test_expand_batch_to_tokens_spreads_per_request_values():
    import torch
    from vllm.platforms import current_platform

    from specterm.engine.vllm_patches import expand_batch_to_tokens

    current_platform.register_triton_kernel_overrides()  # what a CPU engine does before it samples
    cu = torch.tensor([4, 6, 9], dtype=torch.int32)
    temps = expand_batch_to_tokens(torch.tensor([1.0, 0.7, 0.0]), cu, 9, replace_from=0, replace_to=1)
    assert temps.dtype == torch.float32
    assert torch.allclose(temps, torch.tensor([1, 1, 1, 1, 0.7, 0.7, 1, 1, 1.0]))
    top_k = expand_batch_to_tokens(torch.tensor([5, 0, 7], dtype=torch.int32), cu, 9)
    assert top_k.dtype == torch.int32 and top_k.tolist() == [5, 5, 5, 5, 0, 0, 7, 7, 7]
    assert expand_batch_to_tokens(torch.tensor([0.9]), torch.tensor([0]), 0).numel() == 0  # no drafts


@pytest.fixture(scope="module")
def engines(tiny_pair):
    from specterm.engine import EngineConfig, load_engine

    target, draft = tiny_pair
    spec = load_engine(EngineConfig(target=target, draft=draft, num_speculative_tokens=4))
    plain = load_engine(EngineConfig(target=target, method=None))
    yield spec, plain
    spec.close()
    plain.close()


@pytest.mark.engine
def test_fix_is_installed_in_a_cpu_engine(engines):
    from specterm.engine.vllm_patches import installed

    assert installed()
    assert not engines[0].capabilities.sampling_verification_broken


@pytest.mark.engine
@pytest.mark.parametrize("temperature", [1.0, 0.7])
def test_speculative_samples_follow_the_target_distribution(engines, temperature):
    from specterm.bench.distribution import run_distribution_check

    check = run_distribution_check(*engines, PROMPT, temperature=temperature, n=2000)
    assert check.ok, check.describe()
    assert all(t.categories >= 5 for t in check.tests), "the prompt must leave a real choice"


@pytest.mark.engine
def test_distribution_test_catches_the_unfixed_cpu_kernel(engines, monkeypatch):
    import vllm.v1.sample.rejection_sampler as rs

    from specterm.bench.distribution import run_distribution_check
    from specterm.engine import vllm_patches

    assert vllm_patches._original is not None
    monkeypatch.setattr(rs, "expand_batch_to_tokens", vllm_patches._original)
    check = run_distribution_check(*engines, PROMPT, temperature=1.0, n=2000)
    assert check.tests[0].p_value >= check.alpha  # position 1 (prefill, no draft) is unaffected
    assert max(t.p_value for t in check.tests[1:]) < 1e-10, check.describe()
