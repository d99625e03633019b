"""Reproducible training of the embedded pair (tokenizer, target, draft) on ``corpus.generate``.

Everything is seeded (corpus, tokenizer, init, batches) and runs single-process on CPU with a fixed
thread count, so a rerun with the same settings gives the same weights: final losses agree to 1e-4
(tested with the ``quick`` settings; on another CPU or torch build, float summation order may differ
and losses agree to about 1e-2, agreement to about 0.01).

Only the generated calls are trained (loss masked elsewhere): the prompt is context, never output.
Weights are saved as bf16 safetensors (vLLM loads them as float32 for the lossless checks).
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from specterm.agent.prompt import agent_chat_template

SPECIAL = ["<unk>", "<s>", "</s>", "<pad>"]


@dataclass
class Settings:
    seed: int = 0
    n_sql: int = 5000
    n_ops: int = 2500
    vocab_size: int = 3000
    target_hidden: int = 256
    target_layers: int = 4
    target_steps: int = 2200
    draft_hidden: int = 128
    draft_layers: int = 1
    draft_steps: int = 1200
    batch: int = 8
    lr: float = 2e-3
    max_positions: int = 1024
    threads: int = 2
    split_digits: bool = True
    """One token per digit, so numbers and ids are copied token for token (``build_tokenizer``)."""
    example_k: int = 2
    """Worked examples retrieved into each training prompt (set the agents' ``example_k`` to match)."""
    heldout: int = 120
    """In-distribution transcripts kept out of training (training phrasings, unseen entities/typos)."""
    heldout_phrasings: int = 240
    """Transcripts of the held-out phrasings (``intents``: never in the corpus) for the eval."""


QUICK = Settings(
    n_sql=40,
    n_ops=30,
    vocab_size=600,
    target_hidden=64,
    target_layers=1,
    target_steps=6,
    draft_hidden=64,
    draft_layers=1,
    draft_steps=4,
    batch=4,
    heldout=10,
    heldout_phrasings=10,
)


def build_tokenizer(texts: list[str], vocab_size: int, split_digits: bool = False):
    """Byte-level BPE with the agent chat template. ``split_digits`` makes every digit its own token
    (as Llama and Qwen do): a number in the question ("Ġ5", "722") and the same number in a JSON call
    ("57", "22") otherwise become different tokens, so copying it means learning a mapping instead of
    attending to and repeating the same ids."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    byte_level = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.pre_tokenizer = (
        pre_tokenizers.Sequence([pre_tokenizers.Digits(individual_digits=True), byte_level])
        if split_digits
        else byte_level
    )
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=SPECIAL,
        show_progress=False,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    tok.train_from_iterator(texts, trainer=trainer)
    out = PreTrainedTokenizerFast(
        tokenizer_object=tok, bos_token="<s>", eos_token="</s>", unk_token="<unk>", pad_token="<pad>"
    )
    out.chat_template = agent_chat_template()  # saved as chat_template.jinja next to the tokenizer
    return out


def encode(tokenizer, transcripts) -> list[tuple[list[int], list[int]]]:
    """(input ids, labels) per transcript; labels are -100 outside the calls."""
    out = []
    for t in transcripts:
        enc = tokenizer(t.text, return_offsets_mapping=True)
        ids, labels = enc["input_ids"], []
        for i, (a, _b) in zip(ids, enc["offset_mapping"]):
            labels.append(i if any(s <= a < e for s, e in t.calls) else -100)
        out.append((ids, labels))
    return out


def model_config(vocab: int, hidden: int, layers: int, max_positions: int, name: str):
    from transformers import LlamaConfig

    return LlamaConfig(
        vocab_size=vocab,
        hidden_size=hidden,
        intermediate_size=hidden * 3,
        num_hidden_layers=layers,
        num_attention_heads=max(hidden // 64, 1),  # head_dim 64 (vLLM CPU)
        num_key_value_heads=max(hidden // 128, 1),
        max_position_embeddings=max_positions,
        bos_token_id=1,
        eos_token_id=2,
        pad_token_id=3,
        tie_word_embeddings=False,
        torch_dtype="bfloat16",
        name_or_path=name,
    )


def _batch(data, idx, pad: int):
    import torch

    n = max(len(data[i][0]) for i in idx)
    x = torch.full((len(idx), n), pad, dtype=torch.long)
    y = torch.full((len(idx), n), -100, dtype=torch.long)
    m = torch.zeros((len(idx), n), dtype=torch.long)
    for r, i in enumerate(idx):
        ids, lab = data[i]
        x[r, : len(ids)] = torch.tensor(ids)
        y[r, : len(lab)] = torch.tensor(lab)
        m[r, : len(ids)] = 1
    return x, y, m


def train_model(model, data, *, steps: int, seed: int, batch: int, lr: float, pad: int, log=None) -> float:
    import torch

    g = torch.Generator().manual_seed(seed)
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.01)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=lr, total_steps=steps, pct_start=0.1)
    model.train()
    recent: list[float] = []
    t0 = time.perf_counter()
    for step in range(steps):
        idx = torch.randint(0, len(data), (batch,), generator=g).tolist()
        x, y, m = _batch(data, idx, pad)
        loss = model(input_ids=x, attention_mask=m, labels=y).loss
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        recent = (recent + [float(loss.detach())])[-20:]
        if log and (step % 50 == 0 or step == steps - 1):
            log(f"  step {step}/{steps} loss {recent[-1]:.4f} ({time.perf_counter() - t0:.0f}s)")
    model.eval()
    return sum(recent) / len(recent)


def evaluate(target, draft, data, pad: int) -> dict:
    """Teacher-forced greedy agreement on held-out call tokens: target vs draft, and each vs truth."""
    import torch

    agree = t_ok = d_ok = n = 0
    losses = {"target": 0.0, "draft": 0.0}
    with torch.no_grad():
        for i in range(0, len(data), 8):
            x, y, m = _batch(data, list(range(i, min(i + 8, len(data)))), pad)
            lt, ld = target(input_ids=x, attention_mask=m), draft(input_ids=x, attention_mask=m)
            mask = y[:, 1:] != -100
            pt, pd = lt.logits[:, :-1].argmax(-1)[mask], ld.logits[:, :-1].argmax(-1)[mask]
            truth = y[:, 1:][mask]
            agree += int((pt == pd).sum())
            t_ok += int((pt == truth).sum())
            d_ok += int((pd == truth).sum())
            n += int(mask.sum())
            for k, out in (("target", lt), ("draft", ld)):
                losses[k] += float(torch.nn.functional.cross_entropy(out.logits[:, :-1][mask], truth, reduction="sum"))
    return {
        "greedy_agreement": round(agree / n, 4),
        "target_token_accuracy": round(t_ok / n, 4),
        "draft_token_accuracy": round(d_ok / n, 4),
        "heldout_call_tokens": n,
        "heldout_loss": {k: round(v / n, 4) for k, v in losses.items()},
    }


def train_pair(out: Path, s: Settings = Settings(), log=print) -> dict:  # noqa: B008 - s is only read
    """Build ``out/target`` and ``out/draft`` (+ ``out/train.json``) and return the report."""
    import torch
    from transformers import LlamaForCausalLM

    from specterm.models.training.corpus import generate

    torch.set_num_threads(s.threads)
    torch.use_deterministic_algorithms(True)
    out = Path(out)
    t0 = time.perf_counter()
    transcripts = generate(s.seed, s.n_sql, s.n_ops, example_k=s.example_k)
    log(f"corpus: {len(transcripts)} transcripts in {time.perf_counter() - t0:.0f}s")
    tokenizer = build_tokenizer([t.text for t in transcripts], s.vocab_size, split_digits=s.split_digits)
    data = encode(tokenizer, transcripts)
    longest = max(len(d[0]) for d in data)
    if longest > s.max_positions:
        raise ValueError(f"a transcript has {longest} tokens > max_positions {s.max_positions}")
    train, held = data[s.heldout :], data[: s.heldout]
    pad = tokenizer.pad_token_id
    report: dict = {
        "settings": asdict(s),
        "transcripts": len(transcripts),
        "longest_tokens": longest,
        "vocab": len(tokenizer),
    }
    models = {}
    for name, hidden, layers, steps in (
        ("target", s.target_hidden, s.target_layers, s.target_steps),
        ("draft", s.draft_hidden, s.draft_layers, s.draft_steps),
    ):
        torch.manual_seed(s.seed)
        model = LlamaForCausalLM(
            model_config(len(tokenizer), hidden, layers, s.max_positions, f"specterm-embedded-{name}")
        )
        log(f"{name}: {sum(p.numel() for p in model.parameters()) / 1e6:.2f}M params, {steps} steps")
        t1 = time.perf_counter()
        loss = train_model(model, train, steps=steps, seed=s.seed, batch=s.batch, lr=s.lr, pad=pad, log=log)
        report[name] = {
            "params": sum(p.numel() for p in model.parameters()),
            "final_loss": round(loss, 6),
            "train_s": round(time.perf_counter() - t1, 1),
        }
        models[name] = model
    report["eval"] = evaluate(models["target"], models["draft"], held, pad)
    n_ops = s.heldout_phrasings * s.n_ops // (s.n_sql + s.n_ops)
    unseen = encode(
        tokenizer, generate(s.seed + 1, s.heldout_phrasings - n_ops, n_ops, example_k=s.example_k, heldout=True)
    )
    report["eval_heldout_phrasings"] = evaluate(models["target"], models["draft"], unseen, pad)
    for name, model in models.items():
        d = out / name
        model.to(torch.bfloat16).save_pretrained(str(d), safe_serialization=True)
        tokenizer.save_pretrained(str(d))
    (out / "train.json").write_text(json.dumps(report, indent=2) + "\n")
    log(json.dumps(report["eval"]))
    log(json.dumps(report["eval_heldout_phrasings"]))
    return report
