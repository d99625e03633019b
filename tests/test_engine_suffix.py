"""Suffix decoding (vLLM ``method="suffix"``, the arctic-inference package) on the real CPU engine.

The config and error tests run everywhere; the engine tests need arctic-inference (the ``suffix``
extra, built from source) and skip with that reason when it is missing.
"""

from __future__ import annotations

import sys

import pytest

from specterm.bench.workloads import ENGINE_CHECK, RAW
from specterm.engine import EngineConfig, GenerationParams
from specterm.engine.base import SUFFIX_KNOBS
from specterm.errors import EngineUnavailable

try:
    import arctic_inference.suffix_decoding  # noqa: F401

    HAS_SUFFIX = True
except ImportError:
    HAS_SUFFIX = False

needs_suffix = pytest.mark.skipif(
    not HAS_SUFFIX, reason="arctic-inference is not installed (pip install 'specterm[suffix]')"
)

PROMPTS = [*ENGINE_CHECK, RAW["toolcalls"][2]]
MAX_TOKENS = 32


@pytest.mark.engine  # builds vLLM EngineArgs
def test_suffix_knobs_are_validated_and_reach_vllms_speculative_config(tiny_pair):
    from pydantic import ValidationError

    from specterm.engine.vllm_engine import _engine_args

    with pytest.raises(ValidationError):
        EngineConfig(target="t", method="suffix", suffix_decoding_min_token_prob=1.5)
    config = EngineConfig(
        target=tiny_pair[0],
        method="suffix",
        num_speculative_tokens=8,
        suffix_decoding_max_tree_depth=16,
        suffix_decoding_min_token_prob=0.2,
    )
    spec = _engine_args(config).speculative_config
    assert spec["method"] == "suffix" and spec["num_speculative_tokens"] == 8 and "model" not in spec
    assert {k: spec[k] for k in SUFFIX_KNOBS} == {k: getattr(config, k) for k in SUFFIX_KNOBS}


def test_cli_flags_and_environment_set_the_suffix_knobs(monkeypatch, tiny_pair):
    import argparse

    from specterm.cli.common import add_engine_args, engine_config_from_args

    p = argparse.ArgumentParser()
    add_engine_args(p)
    monkeypatch.setenv("SPECTERM_SUFFIX_DECODING_MAX_SPEC_FACTOR", "2.5")
    args = p.parse_args(
        [
            "--target",
            tiny_pair[0],
            "--method",
            "suffix",
            "--suffix-decoding-max-tree-depth",
            "12",
            "--suffix-decoding-max-cached-requests",
            "0",
        ]
    )
    config = engine_config_from_args(args)
    assert config.method == "suffix"
    assert (
        config.suffix_decoding_max_tree_depth,
        config.suffix_decoding_max_cached_requests,
        config.suffix_decoding_max_spec_factor,
        config.suffix_decoding_min_token_prob,
    ) == (12, 0, 2.5, 0.1)


def test_without_arctic_inference_method_suffix_is_one_line_naming_the_install(monkeypatch, tiny_pair):
    from specterm.engine.vllm_engine import validate_config

    # Python's own way to make a module unimportable: a None entry in sys.modules.
    monkeypatch.setitem(sys.modules, "arctic_inference", None)
    monkeypatch.delitem(sys.modules, "arctic_inference.suffix_decoding", raising=False)
    with pytest.raises(EngineUnavailable) as err:
        validate_config(EngineConfig(target=tiny_pair[0], method="suffix"))
    message = str(err.value)
    assert "\n" not in message and "arctic-inference" in message and "pip install" in message


def test_bench_refuses_suffix_without_arctic_inference_before_loading(monkeypatch, tiny_pair, capsys):
    from specterm.cli import main

    monkeypatch.setitem(sys.modules, "arctic_inference", None)
    monkeypatch.delitem(sys.modules, "arctic_inference.suffix_decoding", raising=False)
    rc = main(["bench", "--target", tiny_pair[0], "--methods", "suffix", "--k", "4", "--workload", "agent"])
    assert rc != 0
    assert "arctic-inference" in capsys.readouterr().err


def _run(engine, prompt):
    from specterm.events import EngineCounters, SpecStep

    events = []
    finished = engine.generate(prompt, GenerationParams(max_tokens=MAX_TOKENS), events.append)
    steps = [e for e in events if isinstance(e, SpecStep)]
    counters = [e for e in events if isinstance(e, EngineCounters)]
    return finished, steps, counters


def _ids(steps):
    return [t.id for s in steps for t in s.tokens]


@pytest.fixture(scope="module")
def suffix_runs(tiny_pair):
    """Target-only outputs, then the suffix engine over the prompts twice (the second pass meets a
    global tree that holds the first pass's responses), then once more after resetting the tree."""
    from specterm.engine import load_engine

    target, _ = tiny_pair
    with load_engine(EngineConfig(target=target, method=None)) as engine:
        base = [_run(engine, p) for p in PROMPTS]
    with load_engine(EngineConfig(target=target, method="suffix", num_speculative_tokens=8)) as engine:
        first = [_run(engine, p) for p in PROMPTS]
        second = [_run(engine, p) for p in PROMPTS]
        engine.reset_suffix_cache()
        engine.reset_prefix_cache()
        after_reset = [_run(engine, p) for p in PROMPTS]
    return base, first, second, after_reset


@pytest.mark.engine
@needs_suffix
def test_greedy_suffix_output_is_identical_to_target_only(suffix_runs):
    base, *passes = suffix_runs
    for runs in passes:
        for prompt, (ref, spec) in zip(PROMPTS, zip(base, runs)):
            assert _ids(spec[1]) == _ids(ref[1]), prompt
            assert spec[0].text == ref[0].text


@pytest.mark.engine
@needs_suffix
def test_suffix_verdicts_reconcile_and_drafts_vary_per_step(suffix_runs):
    _, *passes = suffix_runs
    lengths, accepted = set(), 0
    for runs in passes:
        for finished, steps, counters in runs:
            assert len(counters) == 1 and counters[0].matched, counters[0].detail
            assert sum(len(s.tokens) for s in steps) == finished.output_tokens
            for s in steps:
                lengths.add(len(s.drafted))
                accepted += s.accepted
                assert s.rejected == s.drafted[s.accepted :]
                if not s.drafted:
                    assert {t.verdict for t in s.tokens} == {"target"}
    assert 0 in lengths and len(lengths) > 2  # a variable number of drafts, k = 0 steps included
    assert accepted > 0


@pytest.mark.engine
@needs_suffix
def test_the_global_tree_learns_across_requests_until_reset(suffix_runs):
    _, first, second, after_reset = suffix_runs

    def accepted(runs):
        return sum(s.accepted for _, steps, _ in runs for s in steps)

    # The second pass repeats each prompt: the tree holds the first pass's responses. The bench's
    # prefix-cache reset does not touch it; reset_suffix_cache does.
    assert accepted(second) > accepted(first)
    assert accepted(after_reset) < accepted(second)
