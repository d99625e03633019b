"""Fine-tune a pretrained instruct model on the embedded pair's agent corpus (an experiment for issue 15).

The from-scratch embedded pair (4.5 M / 0.9 M parameters) picks the right call shape from its
retrieved examples but cannot *copy*: it writes 9000 for 900 and a name from the example instead of
the question. A pretrained model copies already; what it lacks is the agents' format and tools.
This trains one on the same oracle transcripts as ``specterm models train`` (``models.corpus``),
written in the model's own chat template with the call key the loop uses for it, loss on the calls
(and the end-of-turn token after each) only. What trains: with ``--lora-rank R`` a rank-R LoRA
(peft) on every linear layer of every block (the shipped pair: R = 16, 4.9 M parameters, saved
to ``OUT/adapter`` and merged into ``OUT``); without it the top ``--train-layers`` layers whole
(the forward pass costs the same; the backward stops there). Measure the result with
``scripts/agent_eval.py --heldout 40 --target OUT --no-spec``.

    # the shipped smollm2-agent target: ~75 min on 2 cores (about 11 s a step)
    .venv/bin/python scripts/finetune_pretrained.py --out /tmp/smol-lora16 --steps 400 \
        --n-sql 900 --n-ops 700 --lora-rank 16 --lr 2e-4 --bf16
    (base: ~/.cache/specterm/models/smollm2-135m-instruct from `specterm models fetch smollm2`)

Batches: the transcripts shuffled with ``--seed``, grouped by length (fewer pad tokens), groups of
``--batch`` taken in a shuffled order; constant learning rate, AdamW without weight decay.
``--init DIR --skip N`` continues a saved run at its step ``N`` (a fresh optimizer state).
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from specterm.engine.chat import PromptRenderer
from specterm.models.smollm2_agent import LORA_TARGETS
from specterm.models.training.corpus import Render, add_training_args, generate, training_options
from specterm.models.training.train import _batch, encode
from specterm.paths import model_cache_dir


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--base", type=Path, default=model_cache_dir("smollm2-135m-instruct"))
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--init", type=Path, help="start from these weights (default: --base)")
    ap.add_argument("--skip", type=int, default=0, help="first step (continuing a run)")
    ap.add_argument("--steps", type=int, default=115, help="last step")
    ap.add_argument("--n-sql", type=int, default=700)
    ap.add_argument("--n-ops", type=int, default=500)
    ap.add_argument("--corpus-seed", type=int, default=7)
    ap.add_argument("--seed", type=int, default=0, help="batch order and torch")
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--lr", type=float, default=5e-5)
    ap.add_argument("--train-layers", type=int, default=10)
    ap.add_argument(
        "--lora-rank",
        type=int,
        default=0,
        help="train a LoRA of this rank on every linear layer (peft) instead of whole top layers",
    )
    ap.add_argument("--bf16", action="store_true", help="autocast the forward pass to bf16 (AMX CPUs)")
    add_training_args(ap)
    args = ap.parse_args()
    options = training_options(ap, args)

    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(args.base)
    renderer = PromptRenderer(tok, model=str(args.base))
    if not renderer.can_chat:
        sys.exit(f"error: {args.base} has no chat template")
    t0 = time.perf_counter()
    transcripts = generate(
        args.corpus_seed, args.n_sql, args.n_ops, example_k=2, render=Render.chat(renderer), **options
    )
    data = encode(tok, transcripts)
    print(
        f"corpus: {len(data)} transcripts, {sum(len(d[0]) for d in data) / len(data):.0f} tokens each "
        f"(max {max(len(d[0]) for d in data)}), {time.perf_counter() - t0:.0f}s",
        flush=True,
    )

    torch.manual_seed(args.seed)
    torch.set_num_threads(2)
    model = AutoModelForCausalLM.from_pretrained(args.init or args.base, dtype=torch.float32)
    if args.lora_rank:
        from peft import LoraConfig, get_peft_model

        model = get_peft_model(
            model,
            LoraConfig(
                r=args.lora_rank,
                lora_alpha=2 * args.lora_rank,
                lora_dropout=0.0,
                target_modules=list(LORA_TARGETS),
                task_type="CAUSAL_LM",
            ),
        )
    else:
        for p in model.parameters():
            p.requires_grad = False
        for module in [*model.model.layers[-args.train_layers :], model.model.norm]:
            for p in module.parameters():
                p.requires_grad = True
    params = [p for p in model.parameters() if p.requires_grad]
    print(
        f"trainable: {sum(p.numel() for p in params) / 1e6:.1f}M of "
        f"{sum(p.numel() for p in model.parameters()) / 1e6:.1f}M parameters",
        flush=True,
    )
    opt = torch.optim.AdamW(params, lr=args.lr, weight_decay=0.0)

    rng = random.Random(args.seed)
    order = list(range(len(data)))
    rng.shuffle(order)
    order.sort(key=lambda i: len(data[i][0]) // 64 + rng.random())
    batches = [order[i : i + args.batch] for i in range(0, len(order), args.batch)]
    rng.shuffle(batches)
    pad = tok.pad_token_id if tok.pad_token_id is not None else 0
    model.train()
    ema, t0 = None, time.perf_counter()
    for step in range(args.skip, args.steps):
        x, y, m = _batch(data, batches[step % len(batches)], pad)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=args.bf16):
            loss = model(input_ids=x, attention_mask=m, labels=y).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        opt.zero_grad()
        ema = float(loss.detach()) if ema is None else 0.9 * ema + 0.1 * float(loss.detach())
        if (step + 1) % 10 == 0 or step < 3 or step + 1 == args.steps:
            print(
                f"step {step + 1}/{args.steps} (epoch {(step + 1) / len(batches):.2f}) loss {ema:.4f} "
                f"{time.perf_counter() - t0:.0f}s",
                flush=True,
            )
    if args.lora_rank:  # the adapter is what ships; the merged model is what the eval loads
        model.save_pretrained(args.out / "adapter")
        model = model.merge_and_unload()
    model.to(torch.bfloat16).save_pretrained(args.out, safe_serialization=True)
    tok.save_pretrained(args.out)
    report = {
        "trainable_params": sum(p.numel() for p in params),
        "final_loss_ema": round(ema, 6),
        "train_s": round(time.perf_counter() - t0, 1),
        "settings": {k: str(v) for k, v in vars(args).items() if k != "base"},
    }
    (args.out / "train.json").write_text(json.dumps(report, indent=2) + "\n")
    print(f"saved {args.out}")


if __name__ == "__main__":
    main()
