"""Write the shipped SmolLM2 agent pair (``models/smollm2-agent``) from a fine-tune and a draft run.

    .venv/bin/python scripts/package_smollm2_agent.py --target /tmp/smol-ft --draft /tmp/smol-draft
    .venv/bin/python scripts/package_smollm2_agent.py --draft /tmp/smol-draft   # a new draft, same target

The target ships as its LoRA adapter (``--target``/adapter, from ``finetune_pretrained.py --lora-rank``)
in bf16, peft's format, with the base named by its specterm model name rather than this machine's
path; the draft ships whole without its tokenizer (the base's is copied in at build time). Their
training reports go to ``train.json``.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from specterm.models.smollm2_agent import ADAPTER, TOKENIZER_FILES, shipped_dir

BASE_NAME = "smollm2-135m-instruct"  # `specterm models fetch smollm2` puts it in the cache under this name


def write_adapter(src: Path, out: Path) -> dict:
    """Copy the peft adapter in ``src`` to ``out`` in bf16 (the base's dtype: half the bytes, and
    the merge rounds to bf16 anyway); returns what the report says of it."""
    import torch
    from safetensors.torch import load_file, save_file

    out.mkdir(parents=True, exist_ok=True)
    weights = load_file(str(src / "adapter_model.safetensors"))
    save_file(
        {k: v.to(torch.bfloat16).contiguous() for k, v in weights.items()},
        str(out / "adapter_model.safetensors"),
        metadata={"format": "pt"},
    )
    config = json.loads((src / "adapter_config.json").read_text())
    config["base_model_name_or_path"] = BASE_NAME
    config["target_modules"] = sorted(config["target_modules"])  # peft saves a set: a stable diff
    (out / "adapter_config.json").write_text(json.dumps(config, indent=2, sort_keys=True) + "\n")
    return {
        "lora_rank": config["r"],
        "lora_alpha": config["lora_alpha"],
        "target_modules": config["target_modules"],
        "adapter_params": sum(v.numel() for v in weights.values()),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument(
        "--target",
        type=Path,
        help="scripts/finetune_pretrained.py --lora-rank R --out (default: keep the shipped adapter and its report)",
    )
    ap.add_argument("--draft", type=Path, required=True, help="scripts/train_chat_draft.py --out")
    ap.add_argument("--out", type=Path, default=shipped_dir())
    ap.add_argument("--eval", type=Path, help="scripts/agent_eval.py --json output to record with the pair")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    shipped = json.loads((args.out / "train.json").read_text()) if (args.out / "train.json").is_file() else {}
    if args.target is None:  # a new draft for the shipped target
        if "target" not in shipped or not (args.out / ADAPTER / "adapter_config.json").is_file():
            sys.exit(f"error: {args.out} has no shipped target adapter to keep; give --target")
        adapter = shipped["target"]
    else:
        if not (args.target / "adapter" / "adapter_config.json").is_file():
            sys.exit(f"error: {args.target} has no adapter/ (train it with --lora-rank)")
        shutil.rmtree(args.out / ADAPTER, ignore_errors=True)
        (args.out / "target-delta.safetensors").unlink(missing_ok=True)  # what shipped before the LoRA
        adapter = write_adapter(args.target / "adapter", args.out / ADAPTER)
    draft = args.out / "draft"
    if draft.exists():
        shutil.rmtree(draft)
    shutil.copytree(args.draft, draft, ignore=shutil.ignore_patterns(*TOKENIZER_FILES, "train.json"))
    report = {"target": adapter}
    for name, src in (("target", args.target), ("draft", args.draft)):
        if src is not None and (src / "train.json").is_file():
            info = json.loads((src / "train.json").read_text())
            # this machine's paths say nothing elsewhere; --train-layers is unused when a LoRA trains
            for key in ("out", "target", "base", "train_layers" if name == "target" else ""):
                info.get("settings", {}).pop(key, None)
            report.setdefault(name, {}).update(info)
    if args.eval is None and args.target is None and "eval" in shipped:
        report["eval"] = shipped["eval"]  # greedy output is the target's whatever the draft: success stands
    if args.eval:
        ev = json.loads(args.eval.read_text())
        report["eval"] = {
            "cases": ev["cases"],
            **{
                name: {k: a[k] for k in ("cases", "tool", "arguments", "answer", "success")}
                for name, a in ev["agents"].items()
            },
        }
    (args.out / "train.json").write_text(json.dumps(report, indent=2) + "\n")
    size = sum(f.stat().st_size for f in args.out.rglob("*") if f.is_file())
    print(
        f"{args.out}: adapter rank {adapter['lora_rank']} ({adapter['adapter_params'] / 1e6:.1f}M parameters), "
        f"{size / 1e6:.1f} MB"
    )


if __name__ == "__main__":
    main()
