"""The default pair: which models a run uses when none is configured, and building it on demand."""

from __future__ import annotations

from pathlib import Path

from specterm.paths import embedded_pair_dir, model_cache_dir


def tiny_pair_dir() -> Path:
    return model_cache_dir("tiny")


def default_model_paths() -> tuple[Path, Path]:
    """Target and draft used when none is configured: the embedded pair shipped with specterm when
    present, else the tiny test pair (built on demand, about a minute, once)."""
    root = embedded_pair_dir()
    if (root / "target" / "config.json").is_file() and (root / "draft" / "config.json").is_file():
        return root / "target", root / "draft"
    root = tiny_pair_dir()
    return root / "target", root / "draft"


def ensure_default_models(log=print) -> tuple[Path, Path]:
    from specterm.engine.vllm_engine import ENGINE_EXTRA_HINT, vllm_build
    from specterm.errors import EngineUnavailable

    if vllm_build() is None:  # building the pair needs torch/transformers, which come with it
        raise EngineUnavailable(f"the vLLM engine is not installed: {ENGINE_EXTRA_HINT}")
    target, draft = default_model_paths()
    if target.parent == embedded_pair_dir():  # shipped, nothing to build
        return target, draft
    from specterm.models.tiny import build_tiny_pair

    if not (target / "config.json").exists() or not (draft / "config.json").exists():
        log(f"specterm: building the default tiny model pair in {target.parent} (once, ~1 min)")
    return build_tiny_pair(tiny_pair_dir())
