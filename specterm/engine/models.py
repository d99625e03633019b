"""Model locations and checks done before vLLM loads anything.

Loading a bad path in vLLM costs seconds and ends in a long traceback; these checks give one line
first: a missing path, a directory that is not a model, or a draft whose tokenizer differs from
the target's (speculation compares token ids, so the vocabularies must be identical).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from specterm.errors import ModelError


def looks_like_hub_id(name: str) -> bool:
    """``org/name`` that is not an existing path: vLLM resolves it from the hub (or its cache)."""
    return name.count("/") == 1 and not name.startswith((".", "/", "~")) and not Path(name).exists()


def check_model_dir(path: str, role: str) -> None:
    """Raise ``ModelError`` unless ``path`` is a hub id or a directory holding a model."""
    if looks_like_hub_id(path):
        return
    p = Path(path).expanduser()
    if not p.exists():
        raise ModelError(f"{role} model path does not exist: {path}")
    if not p.is_dir() or not (p / "config.json").is_file():
        raise ModelError(f"{role} model path is not a model directory (no config.json): {path}")
    try:
        json.loads((p / "config.json").read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise ModelError(f"{role} model has an unreadable config.json ({err}): {path}") from None
    if not any(p.glob("*.safetensors")) and not any(p.glob("*.bin")):
        raise ModelError(f"{role} model directory has no weights (*.safetensors): {path}")


def _vocab(path: str) -> dict[str, int] | None:
    """The tokenizer vocabulary of a local model dir (None for hub ids: checked by vLLM later)."""
    if looks_like_hub_id(path):
        return None
    from transformers import AutoTokenizer

    try:
        tok = AutoTokenizer.from_pretrained(str(Path(path).expanduser()))
    except Exception as err:  # noqa: BLE001 - any loader failure is one line for the user
        raise ModelError(f"cannot load the tokenizer of {path}: {type(err).__name__}: {err}") from None
    return tok.get_vocab()


def check_same_tokenizer(target: str, draft: str) -> None:
    """Refuse a draft whose vocabulary differs from the target's, before any model loads."""
    tv, dv = _vocab(target), _vocab(draft)
    if tv is None or dv is None or tv == dv:
        return
    only_t = len(tv.keys() - dv.keys())
    only_d = len(dv.keys() - tv.keys())
    moved = sum(1 for k in tv.keys() & dv.keys() if tv[k] != dv[k])
    raise ModelError(
        f"draft and target use different tokenizers ({len(dv)} vs {len(tv)} tokens; "
        f"{only_d} only in draft, {only_t} only in target, {moved} with different ids): "
        "speculative decoding compares token ids, so they must share one tokenizer"
    )


def cache_dir() -> Path:
    from platformdirs import user_cache_dir

    return Path(os.environ.get("SPECTERM_CACHE_DIR") or user_cache_dir("specterm"))


def tiny_pair_dir() -> Path:
    return cache_dir() / "models" / "tiny"


def embedded_pair_dir() -> Path:
    """The trained pair shipped with the repo (``specterm models train`` reproduces it)."""
    return Path(__file__).resolve().parents[2] / "models" / "embedded"


def default_model_paths() -> tuple[Path, Path]:
    """Target and draft used when none is configured: the embedded pair shipped in
    ``models/embedded`` when present, else the tiny test pair (built on demand, about a minute, once)."""
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
    from specterm.engine.tiny_models import build_tiny_pair

    if not (target / "config.json").exists() or not (draft / "config.json").exists():
        log(f"specterm: building the default tiny model pair in {target.parent} (once, ~1 min)")
    return build_tiny_pair(tiny_pair_dir())
