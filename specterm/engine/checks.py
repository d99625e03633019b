"""Model checks done before vLLM loads anything (``doctor`` reports the same ``inspect_model_dir``).

Loading a bad path in vLLM costs seconds and ends in a long traceback; these checks give one line
first: a missing path, a directory that is not a model, or a draft whose tokenizer differs from
the target's (speculation compares token ids, so the vocabularies must be identical).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from specterm.errors import ModelError


def looks_like_hub_id(name: str) -> bool:
    """``org/name`` that is not an existing path: vLLM resolves it from the hub (or its cache)."""
    return name.count("/") == 1 and not name.startswith((".", "/", "~")) and not Path(name).exists()


TOKENIZER_FILES = ("tokenizer.json", "tokenizer.model", "vocab.json", "tiktoken.model")


def inspect_model_dir(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Does this directory hold a model vLLM can load? Reads config.json and safetensors headers only."""
    p = Path(path).expanduser()
    result: dict[str, Any] = {"path": str(p), "exists": p.is_dir(), "loads": False, "detail": ""}
    if not p.is_dir():
        result["detail"] = "not found"
        return result
    try:
        json.loads((p / "config.json").read_text(encoding="utf-8"))
    except FileNotFoundError:
        result["detail"] = "no config.json"
        return result
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        result["detail"] = f"config.json unreadable: {err}"
        return result
    if not any((p / name).is_file() for name in TOKENIZER_FILES):
        result["detail"] = "no tokenizer (tokenizer.json / tokenizer.model / vocab.json)"
        return result
    files = sorted(p.glob("*.safetensors"))
    if not files:
        result["detail"] = "no *.safetensors weights"
        return result
    tensors = 0
    for file in files:
        try:
            tensors += _safetensors_tensor_count(file)
        except Exception as err:  # noqa: BLE001 - any header failure means "does not load"
            result["detail"] = f"{file.name}: unreadable safetensors header ({type(err).__name__}: {err})"
            return result
    if tensors == 0:
        result["detail"] = "safetensors files hold no tensors"
        return result
    size = sum(f.stat().st_size for f in files)
    result.update(loads=True, tensors=tensors, weights_bytes=size, detail=f"{tensors} tensors, {size / 1e6:.1f} MB")
    return result


def _safetensors_tensor_count(file: Path) -> int:
    from safetensors import safe_open  # installed with the engine extras

    with safe_open(str(file), framework="numpy") as handle:  # header only; no weights are read
        handle.metadata()
        return len(list(handle.keys()))


def check_model_dir(path: str, role: str) -> None:
    """Raise ``ModelError`` unless ``path`` is a hub id or a directory vLLM can load (``inspect_model_dir``:
    the same check ``specterm doctor`` reports)."""
    if looks_like_hub_id(path):
        return
    found = inspect_model_dir(path)
    if found["loads"]:
        return
    if not Path(path).expanduser().exists():
        raise ModelError(f"{role} model path does not exist: {path}")
    if found["detail"] in ("not found", "no config.json"):
        raise ModelError(f"{role} model path is not a model directory (no config.json): {path}")
    raise ModelError(f"{role} model directory does not load ({found['detail']}): {path}")


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


def check_same_tokenizer(
    target: str,
    draft: str,
    *,
    what: str = "draft and target",
    names: tuple[str, str] = ("target", "draft"),
    why: str = "speculative decoding compares token ids",
) -> None:
    """Refuse two models whose vocabularies differ, before any model loads: a draft and its target
    (the default wording), or ``compare``'s two sides (``what``/``names``/``why`` say which)."""
    tv, dv = _vocab(target), _vocab(draft)
    if tv is None or dv is None or tv == dv:
        return
    only_t = len(tv.keys() - dv.keys())
    only_d = len(dv.keys() - tv.keys())
    moved = sum(1 for k in tv.keys() & dv.keys() if tv[k] != dv[k])
    raise ModelError(
        f"{what} use different tokenizers ({len(dv)} vs {len(tv)} tokens; "
        f"{only_d} only in {names[1]}, {only_t} only in {names[0]}, {moved} with different ids): "
        f"{why}, so they must share one tokenizer"
    )
