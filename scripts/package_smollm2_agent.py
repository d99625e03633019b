"""Write the shipped SmolLM2 agent pair (``models/smollm2-agent``) from a fine-tune and a draft run.

    .venv/bin/python scripts/package_smollm2_agent.py --target /tmp/smol-ft --draft /tmp/smol-draft

The target ships as the tensors its fine-tune changed (``specterm.models.smollm2_agent.write_delta``);
the draft ships whole without its tokenizer (the base's is copied in at build time). Their training
reports go to ``train.json``.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from specterm.models.smollm2_agent import DELTA, TOKENIZER_FILES, shipped_dir, write_delta  # noqa: E402
from specterm.paths import model_cache_dir  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--base", type=Path, default=model_cache_dir("smollm2-135m-instruct"))
    ap.add_argument("--target", type=Path, required=True, help="scripts/finetune_pretrained.py --out")
    ap.add_argument("--draft", type=Path, required=True, help="scripts/train_chat_draft.py --out")
    ap.add_argument("--out", type=Path, default=shipped_dir())
    ap.add_argument("--eval", type=Path, help="scripts/agent_eval.py --json output to record with the pair")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    names = write_delta(args.base / "model.safetensors", args.target / "model.safetensors", args.out / DELTA)
    draft = args.out / "draft"
    if draft.exists():
        shutil.rmtree(draft)
    shutil.copytree(args.draft, draft, ignore=shutil.ignore_patterns(*TOKENIZER_FILES, "train.json"))
    report = {"target": {"delta_tensors": len(names), "layers": sorted({n.split(".")[2] for n in names
                                                                        if n.startswith("model.layers.")}, key=int)}}
    for name, src in (("target", args.target), ("draft", args.draft)):
        if (src / "train.json").is_file():
            info = json.loads((src / "train.json").read_text())
            for key in ("out", "target", "base"):  # this machine's paths say nothing elsewhere
                info.get("settings", {}).pop(key, None)
            report.setdefault(name, {}).update(info)
    if args.eval:
        ev = json.loads(args.eval.read_text())
        report["eval"] = {"cases": ev["cases"], **{name: {k: a[k] for k in ("cases", "tool", "arguments", "answer",
                                                                           "success")}
                                                   for name, a in ev["agents"].items()}}
    (args.out / "train.json").write_text(json.dumps(report, indent=2) + "\n")
    size = sum(f.stat().st_size for f in args.out.rglob("*") if f.is_file())
    print(f"{args.out}: {len(names)} target tensors, {size / 1e6:.1f} MB")


if __name__ == "__main__":
    main()
