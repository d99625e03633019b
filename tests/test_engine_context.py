"""The default context: the model's own, at most ``DEFAULT_MAX_MODEL_LEN`` (README, ``EngineConfig``),
for a hub id too. A local model's is read from its ``config.json`` before the engine starts; a hub
id's only vLLM reads, so the engine args ask vLLM to cap it (``vllm_internals.engine_args``). No hub
access here: the hub ids' args are checked as built, and the cap itself on a local model."""

from __future__ import annotations

import pytest

from specterm.config import PRESETS
from specterm.engine.base import DEFAULT_MAX_MODEL_LEN, EngineConfig


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_a_hub_id_gets_the_default_cap_and_an_explicit_length_wins(name, monkeypatch):
    pytest.importorskip("vllm")
    import huggingface_hub.constants

    from specterm.engine import vllm_engine

    # With the hub offline, EngineArgs resolves a hub id to a cached snapshot (and fails without one);
    # the agent's vector store sets HF_HUB_OFFLINE for the whole process when an earlier test loads it.
    # These args are only built, never loaded.
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", False)

    config = EngineConfig(**PRESETS[name])
    assert vllm_engine.default_max_model_len(config.target) is None  # a hub id: not read here
    args = vllm_engine._engine_args(config)
    assert args.max_model_len is None and args.context_cap == DEFAULT_MAX_MODEL_LEN
    mine = vllm_engine._engine_args(config.model_copy(update={"max_model_len": 8192}))
    assert mine.max_model_len == 8192
    extra = vllm_engine._engine_args(config.model_copy(update={"extra_engine_args": {"max_model_len": 512}}))
    assert extra.max_model_len == 512


@pytest.mark.engine
def test_vllm_caps_the_models_own_context():
    """On a local model (1024 positions), as vLLM builds the model config: the cap applies only where
    the model's own is longer, and never over an explicit length."""
    pytest.importorskip("vllm")
    from specterm.engine.parallel import set_default_env
    from specterm.engine.vllm_engine import _ENV_DEFAULTS
    from specterm.engine.vllm_internals import engine_args
    from specterm.paths import embedded_pair_dir

    set_default_env(_ENV_DEFAULTS)
    target = str(embedded_pair_dir() / "target")

    def context(cap, **kwargs):
        return engine_args({"model": target, **kwargs}, context_cap=cap).create_model_config().max_model_len

    assert context(None) == 1024
    assert context(4096) == 1024
    assert context(256) == 256
    assert context(256, max_model_len=512) == 512
