"""Train a tiny draft, from scratch, for a pretrained chat target fine-tuned on the agent corpus (issue 15).

vLLM's ``draft_model`` speculation needs a draft with the target's vocabulary, so the embedded draft
(a 2,659-token BPE of its own) cannot draft for SmolLM2-135M-Instruct (49,152 tokens). This trains a
small Llama on the same oracle transcripts as ``scripts/finetune_pretrained.py`` — written in the
target's own chat template, tokenized by its tokenizer, loss on the calls and the end of turn after
each — so the draft learns the boilerplate (the JSON keys, the SQL skeletons, the answer sentences)
and the target keeps what needs language. The embedding is tied to the output layer (at 49,152 rows
it is nearly all the draft's bytes), and the loss is computed only at the trained positions, so the
output layer runs on ≈ 1/7 of the tokens.

    .venv/bin/python scripts/train_chat_draft.py --out /tmp/smol-draft --target /tmp/smol-ft

``--target`` (optional) also scores the fine-tuned target against the draft on transcripts of the
held-out phrasings (``corpus.generate(heldout=True)``: never in training): teacher-forced token
accuracy of each on the call tokens, and how often they agree. Seeded; deterministic on one machine.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from specterm.engine.chat import PromptRenderer
from specterm.models.training.corpus import Render, add_training_args, generate, training_options
from specterm.models.training.train import _batch, encode, evaluate
from specterm.paths import model_cache_dir


def draft_config(tok, base_config, hidden: int, layers: int):
    from transformers import LlamaConfig

    return LlamaConfig(
        vocab_size=base_config.vocab_size,
        hidden_size=hidden,
        intermediate_size=hidden * 3,
        num_hidden_layers=layers,
        num_attention_heads=max(hidden // 64, 1),  # head_dim 64 (vLLM CPU)
        num_key_value_heads=1,
        max_position_embeddings=base_config.max_position_embeddings,
        rope_theta=10000.0,
        bos_token_id=tok.bos_token_id,
        eos_token_id=tok.eos_token_id,
        pad_token_id=tok.pad_token_id,
        tie_word_embeddings=True,
        torch_dtype="bfloat16",
        name_or_path="specterm-chat-draft",
    )


def masked_loss(model, x, y, m):
    """Cross-entropy on the trained positions only (the output layer never sees the others)."""
    import torch

    h = model.model(input_ids=x, attention_mask=m).last_hidden_state[:, :-1]
    sel = y[:, 1:] != -100
    return torch.nn.functional.cross_entropy(model.lm_head(h[sel]).float(), y[:, 1:][sel])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument(
        "--base",
        type=Path,
        default=model_cache_dir("smollm2-135m-instruct"),
        help="the target's base model: its tokenizer, chat template and vocabulary",
    )
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--target", type=Path, help="a fine-tuned target to score against the draft")
    ap.add_argument("--hidden", type=int, default=64)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--steps", type=int, default=900)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--n-sql", type=int, default=2000)
    ap.add_argument("--n-ops", type=int, default=1200)
    ap.add_argument("--corpus-seed", type=int, default=7)
    ap.add_argument("--heldout", type=int, default=40, help="held-out-phrasing transcripts to score")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--score-only", action="store_true", help="load the draft in --out and only score it")
    add_training_args(ap)
    args = ap.parse_args()
    options = training_options(ap, args)

    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer, LlamaForCausalLM

    torch.set_num_threads(2)
    torch.use_deterministic_algorithms(True)
    tok = AutoTokenizer.from_pretrained(args.base)
    renderer = PromptRenderer(tok, model=str(args.base))
    if not renderer.can_chat:
        sys.exit(f"error: {args.base} has no chat template")
    render = Render.chat(renderer)
    pad = tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id
    if args.score_only:
        report = json.loads((args.out / "train.json").read_text())
        model = LlamaForCausalLM.from_pretrained(args.out, dtype=torch.float32).eval()
    else:
        report, model = train(args, tok, render, pad, options)
    if args.target:
        n_ops = args.heldout * 2 // 5
        unseen = encode(
            tok,
            generate(
                args.corpus_seed + 1,
                args.heldout - n_ops,
                n_ops,
                example_k=2,
                heldout=True,
                render=render,
                answer_words=args.docs_answer_words,
            ),
        )
        target = AutoModelForCausalLM.from_pretrained(args.target, dtype=torch.float32).eval()
        report["eval_heldout_phrasings"] = evaluate(target, model.float(), unseen, pad)
        print(json.dumps(report["eval_heldout_phrasings"]), flush=True)
    (args.out / "train.json").write_text(json.dumps(report, indent=2) + "\n")
    print(f"saved {args.out}")


def train(args, tok, render, pad, options: dict):
    import torch
    from transformers import AutoConfig, LlamaForCausalLM

    t0 = time.perf_counter()
    data = encode(tok, generate(args.corpus_seed, args.n_sql, args.n_ops, example_k=2, render=render, **options))
    print(
        f"corpus: {len(data)} transcripts, {sum(len(d[0]) for d in data) / len(data):.0f} tokens each, "
        f"{time.perf_counter() - t0:.0f}s",
        flush=True,
    )

    torch.manual_seed(args.seed)
    model = LlamaForCausalLM(draft_config(tok, AutoConfig.from_pretrained(args.base), args.hidden, args.layers))
    n_params = sum(p.numel() for p in model.parameters())
    print(f"draft: {n_params / 1e6:.2f}M parameters ({n_params * 2 / 1e6:.1f} MB bf16), {args.steps} steps", flush=True)
    g = torch.Generator().manual_seed(args.seed)
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.01)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=args.lr, total_steps=args.steps, pct_start=0.1)
    model.train()
    recent: list[float] = []
    t0 = time.perf_counter()
    for step in range(args.steps):
        x, y, m = _batch(data, torch.randint(0, len(data), (args.batch,), generator=g).tolist(), pad)
        loss = masked_loss(model, x, y, m)
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        recent = (recent + [float(loss.detach())])[-20:]
        if (step + 1) % 100 == 0 or step + 1 == args.steps:
            print(
                f"step {step + 1}/{args.steps} loss {sum(recent) / len(recent):.4f} {time.perf_counter() - t0:.0f}s",
                flush=True,
            )
    model.eval()
    report = {
        "params": n_params,
        "final_loss": round(sum(recent) / len(recent), 6),
        "train_s": round(time.perf_counter() - t0, 1),
        "settings": {k: str(v) for k, v in vars(args).items()},
    }
    model.to(torch.bfloat16).save_pretrained(args.out, safe_serialization=True)
    tok.save_pretrained(args.out)
    return report, model


if __name__ == "__main__":
    main()
