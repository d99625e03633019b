"""Configuration layers (pydantic-settings reads the file and the environment): file → environment →
flags, later wins, and a bad value is one line naming the layer it came from."""

from __future__ import annotations

import pytest

from specterm.config import resolve_engine_config
from specterm.errors import ConfigError


@pytest.fixture()
def config_file(tmp_path, monkeypatch):
    path = tmp_path / "config.toml"
    monkeypatch.setenv("SPECTERM_CONFIG", str(path))
    return path


def test_file_then_environment_then_flags(config_file, monkeypatch):
    config_file.write_text('[engine]\ntarget = "/m/t"\nnum_speculative_tokens = 3\ndtype = "bfloat16"\n')
    assert resolve_engine_config({}).num_speculative_tokens == 3
    monkeypatch.setenv("SPECTERM_NUM_SPECULATIVE_TOKENS", "5")
    cfg = resolve_engine_config({})
    assert (cfg.target, cfg.num_speculative_tokens, cfg.dtype) == ("/m/t", 5, "bfloat16")
    assert resolve_engine_config({"num_speculative_tokens": 6, "dtype": None}).num_speculative_tokens == 6
    monkeypatch.setenv("SPECTERM_METHOD", "none")
    assert resolve_engine_config({}).method is None


@pytest.mark.parametrize(
    ("where", "expected"), [("file", "config.toml"), ("env", "environment"), ("flag", "command line")]
)
def test_a_bad_value_names_its_layer(config_file, monkeypatch, where, expected):
    config_file.write_text('[engine]\ntarget = "/m/t"\n' + ("num_speculative_tokens = 99\n" if where == "file" else ""))
    if where == "env":
        monkeypatch.setenv("SPECTERM_NUM_SPECULATIVE_TOKENS", "many")
    flags = {"num_speculative_tokens": 0} if where == "flag" else {}
    with pytest.raises(ConfigError) as err:
        resolve_engine_config(flags)
    msg = str(err.value)
    assert msg.startswith("bad num_speculative_tokens (from ") and expected in msg and "\n" not in msg


def test_unknown_keys_and_broken_toml_are_one_line(config_file):
    config_file.write_text('[engine]\ntarget = "/m/t"\nspeculative_tokens = 4\n')
    with pytest.raises(ConfigError, match=r"bad speculative_tokens \(from .*config.toml\)"):
        resolve_engine_config({})
    config_file.write_text("[engine\n")
    with pytest.raises(ConfigError, match="is not valid TOML"):
        resolve_engine_config({})


@pytest.mark.parametrize("name", ["llama-3.3-70b", "qwen2.5-7b"])
def test_presets_fit_the_gpus_they_name(name):
    """On paper (no GPU here): the preset's TP group is the GPU count it names, and its bf16 weights
    per GPU leave at least a fifth of each GPU's memory for the KV cache and activations."""
    from specterm.config import PRESET_NEEDS, PRESETS

    needs, preset = PRESET_NEEDS[name], PRESETS[name]
    tp = preset.get("tensor_parallel_size", 1)
    assert tp == needs.gpus
    assert needs.weights_per_gpu_gib(tp) <= 0.8 * needs.gpu_gib
    if name == "llama-3.3-70b":  # TP = 1 would not fit even one 141 GB H200
        assert needs.weights_per_gpu_gib(1) > 141e9 / 2**30


@pytest.mark.parametrize("build, eager", [("cpu", True), ("cuda", False)])
def test_eager_only_on_the_cpu_build(monkeypatch, build, eager):
    """CUDA graphs stay on where they exist (small-batch decoding depends on them)."""
    pytest.importorskip("vllm")
    from specterm.engine import vllm_engine
    from specterm.engine.base import EngineConfig
    from specterm.paths import embedded_pair_dir

    monkeypatch.setattr(vllm_engine, "vllm_build", lambda: build)
    pair = embedded_pair_dir()
    args = vllm_engine._engine_args(
        EngineConfig(target=str(pair / "target"), draft=str(pair / "draft"), method="draft_model")
    )
    assert args.enforce_eager is eager


@pytest.mark.parametrize("build, block", [("cpu", 32), ("cuda", None)])
def test_cpu_build_asks_for_32_token_kv_blocks(monkeypatch, build, block):
    """The prefix cache reuses whole blocks: 32-token blocks on the CPU build (vLLM's CPU default is
    128, which left an agent step re-prefilling up to 127 tokens); CUDA keeps vLLM's own; a user's
    ``extra_engine_args`` still wins."""
    pytest.importorskip("vllm")
    from specterm.engine import vllm_engine
    from specterm.engine.base import EngineConfig
    from specterm.paths import embedded_pair_dir

    monkeypatch.setattr(vllm_engine, "vllm_build", lambda: build)
    target = str(embedded_pair_dir() / "target")
    assert vllm_engine._engine_args(EngineConfig(target=target, method=None)).block_size == block
    mine = EngineConfig(target=target, method=None, extra_engine_args={"block_size": 64})
    assert vllm_engine._engine_args(mine).block_size == 64
