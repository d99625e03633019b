"""Build a tiny Llama-architecture target/draft pair with a shared tokenizer, offline.

Used by the tests: a pair small enough to build in about a minute, and fp32 so that lossless checks
are exact. No model hub is reachable here, so everything is made from scratch, deterministically
from a seed:

* a byte-level BPE tokenizer trained on a small built-in corpus (any text tokenizes);
* a target (4 layers, hidden 128) and a draft (1 layer, hidden 64), both trained for a few
  seconds on a generated corpus shaped like the agent's output. The target is deeper and trained
  longer, so the draft agrees with it often but not always: a realistic mix of accepted,
  corrected and bonus tokens.

Weights are saved in fp32: lossless checks (speculative == target-only) need it, because in bf16 the
K+1-position verification pass and single-token decoding round differently.
"""

from __future__ import annotations

import json
from pathlib import Path

CORPUS = """\
SELECT name, total FROM orders JOIN customers ON orders.customer_id = customers.id WHERE total > 100;
{"tool": "query_sql", "arguments": {"sql": "SELECT count(*) FROM orders"}}
{"tool": "search_docs", "arguments": {"query": "restart the payment service", "top_k": 3}}
The target model verifies all draft tokens in one forward pass and keeps the longest agreeing prefix.
Speculative decoding pairs a small draft model with a large target model; output is unchanged.
Runbook: if the queue backs up, drain the workers, check the database, then restart the service.
The quick brown fox jumps over the lazy dog. 0123456789 + - * / = < > ( ) [ ] { } , . ; : ' " ?
"""


def build_tokenizer(out_dir: Path, vocab_size: int = 512) -> None:
    """The embedded pair's byte-level BPE recipe (``models.training.train``), on the built-in corpus."""
    # Lazily: only building a pair needs the training room; locating a built one never opens it.
    from specterm.models.training.train import build_tokenizer as train_tokenizer

    train_tokenizer(CORPUS.splitlines() * 4, vocab_size).save_pretrained(str(out_dir))


def _config(vocab_size: int, layers: int, hidden: int, name: str):
    from transformers import LlamaConfig

    return LlamaConfig(
        vocab_size=vocab_size,
        hidden_size=hidden,
        intermediate_size=hidden * 2,
        num_hidden_layers=layers,
        # vLLM's CPU attention kernels support head_dim 64 (16 is refused), so heads = hidden/64.
        num_attention_heads=max(hidden // 64, 1),
        num_key_value_heads=max(hidden // 128, 1),
        max_position_embeddings=1024,
        bos_token_id=1,
        eos_token_id=2,
        pad_token_id=3,
        tie_word_embeddings=False,
        torch_dtype="float32",
        name_or_path=name,
    )


def corpus_lines(seed: int = 0, n: int = 1500) -> list[str]:
    """A small, varied, deterministic corpus in the shapes the agent produces: tool-call JSON
    (compact, as structured outputs emit it with ``disable_any_whitespace``), SQL, runbook prose. Entities vary (names, numbers, tables) so a weak draft gets the
    boilerplate right and misses values, as real drafts do."""
    import random

    rng = random.Random(seed)
    names = ["alice", "bob", "carol", "dave", "erin", "frank", "grace", "heidi", "ivan", "judy"]
    tables = ["orders", "customers", "products", "payments", "refunds", "invoices"]
    cols = ["id", "name", "total", "status", "created_at", "country", "amount", "price"]
    services = ["payments", "search", "auth", "billing", "queue", "gateway"]
    verbs = ["restart", "drain", "check", "scale", "roll back", "page the owner of"]
    out = []
    for _ in range(n):
        kind = rng.random()
        t, c, c2 = rng.choice(tables), rng.choice(cols), rng.choice(cols)
        num = rng.randint(1, 999)
        if kind < 0.35:
            sql = f"SELECT {c}, {c2} FROM {t} WHERE {c} > {num} ORDER BY {c2} LIMIT {rng.randint(1, 50)}"
            out.append('{"tool":"query_sql","arguments":{"sql":"%s"}}' % sql)
        elif kind < 0.55:
            q = f"{rng.choice(verbs)} the {rng.choice(services)} service"
            out.append('{"tool":"search_docs","arguments":{"query":"%s","top_k":%d}}' % (q, rng.randint(1, 5)))
        elif kind < 0.7:
            out.append(f"The customer {rng.choice(names)} placed {num} {t} with {c} above {num // 3}.")
        else:
            s1, s2 = rng.choice(services), rng.choice(services)
            out.append(
                f"Runbook: if the {s1} queue backs up, {rng.choice(verbs)} the {s2} "
                f"workers, then {rng.choice(verbs)} the {s1} service within {num} seconds."
            )
    return out


def _train(model, ids, *, steps: int, seed: int, batch: int = 16, seq: int = 64, lr: float = 3e-3):
    import torch

    g = torch.Generator().manual_seed(seed)
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.0)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=lr, total_steps=steps)
    model.train()
    loss = None
    for _ in range(steps):
        starts = torch.randint(0, len(ids) - seq - 1, (batch,), generator=g)
        x = torch.stack([ids[s : s + seq] for s in starts])
        loss = model(input_ids=x, labels=x).loss
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
    model.eval()
    return float(loss.detach())


def install_chat_template(model_dir: Path) -> bool:
    """Write (or refresh) the agent format's chat template into a model directory built here; True
    when the file changed. Lets a cached pair pick up the template without retraining (or opening
    the training room: it lives here, beside its one caller, not in ``training.train``)."""
    from specterm.agent.prompt import agent_chat_template

    path = Path(model_dir) / "chat_template.jinja"
    text = agent_chat_template()
    if path.is_file() and path.read_text(encoding="utf-8") == text:
        return False
    path.write_text(text, encoding="utf-8")
    return True


def build_tiny_pair(
    root: Path,
    *,
    seed: int = 0,
    target_layers: int = 4,
    target_hidden: int = 128,
    draft_layers: int = 1,
    draft_hidden: int = 64,
    target_steps: int = 300,
    draft_steps: int = 150,
) -> tuple[Path, Path]:
    """Write ``root/target`` and ``root/draft`` (complete HF model dirs) and return both paths.

    Both are trained briefly (seconds on 2 cores) on ``corpus_lines``: the target longer and
    deeper, so it is really better than the draft. Idempotent: a directory already built with the
    same settings is reused.
    """
    root = Path(root)
    target_dir, draft_dir = root / "target", root / "draft"
    stamp = {
        "seed": seed,
        "target": [target_layers, target_hidden, target_steps],
        "draft": [draft_layers, draft_hidden, draft_steps],
        "version": 3,
    }
    stamp_file = root / "build.json"
    if stamp_file.exists() and json.loads(stamp_file.read_text()).get("settings") == stamp:
        for d in (target_dir, draft_dir):  # a pair cached before the template existed
            install_chat_template(d)
        return target_dir, draft_dir

    import torch  # only when building: the common path is the stamp check above
    from transformers import AutoTokenizer, LlamaForCausalLM

    root.mkdir(parents=True, exist_ok=True)
    build_tokenizer(target_dir)
    tokenizer = AutoTokenizer.from_pretrained(str(target_dir))
    text = "\n".join(corpus_lines(seed))
    ids = torch.tensor(tokenizer(text)["input_ids"], dtype=torch.long)

    losses = {}
    for name, out, layers, hidden, steps in (
        ("target", target_dir, target_layers, target_hidden, target_steps),
        ("draft", draft_dir, draft_layers, draft_hidden, draft_steps),
    ):
        torch.manual_seed(seed)
        model = LlamaForCausalLM(_config(len(tokenizer), layers, hidden, f"specterm-tiny-{name}"))
        losses[name] = _train(model, ids, steps=steps, seed=seed)
        model.save_pretrained(str(out), safe_serialization=True)
        tokenizer.save_pretrained(str(out))
    stamp_file.write_text(json.dumps({"settings": stamp, "final_loss": losses}))
    return target_dir, draft_dir
