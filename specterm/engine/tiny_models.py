"""Build a tiny Llama-architecture target/draft pair with a shared tokenizer, offline.

Used by the tests (and as the default pair until the embedded trained pair lands). No model hub is
reachable here, so everything is made from scratch, deterministically from a seed:

* a byte-level BPE tokenizer trained on a small built-in corpus (any text tokenizes);
* a target with ``target_layers`` decoder layers and random weights;
* a draft that *shares* the target's embeddings, first ``draft_layers`` layers, final norm and LM
  head. Sharing the bottom of the network makes the draft agree with the target often but not
  always, which gives a realistic mix of accepted, corrected and bonus tokens.

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

SPECIAL = ["<unk>", "<s>", "</s>", "<pad>"]


def build_tokenizer(out_dir: Path, vocab_size: int = 512) -> None:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=SPECIAL,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(CORPUS.splitlines() * 4, trainer=trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok, bos_token="<s>", eos_token="</s>", unk_token="<unk>", pad_token="<pad>"
    )
    fast.save_pretrained(str(out_dir))


def _config(vocab_size: int, layers: int, hidden: int, seed_note: str):
    from transformers import LlamaConfig

    return LlamaConfig(
        vocab_size=vocab_size,
        hidden_size=hidden,
        intermediate_size=hidden * 2,
        num_hidden_layers=layers,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=1024,
        bos_token_id=1,
        eos_token_id=2,
        pad_token_id=3,
        tie_word_embeddings=False,
        torch_dtype="float32",
        name_or_path=seed_note,
    )


def build_tiny_pair(
    root: Path,
    *,
    seed: int = 0,
    target_layers: int = 4,
    draft_layers: int = 1,
    hidden: int = 64,
) -> tuple[Path, Path]:
    """Write ``root/target`` and ``root/draft`` (each a complete HF model dir); return both paths.

    Idempotent: if both directories already hold a model built with the same settings, nothing is
    rebuilt.
    """
    import torch
    from transformers import AutoTokenizer, LlamaForCausalLM

    root = Path(root)
    target_dir, draft_dir = root / "target", root / "draft"
    stamp = {"seed": seed, "target_layers": target_layers, "draft_layers": draft_layers,
             "hidden": hidden, "version": 1}
    stamp_file = root / "build.json"
    if stamp_file.exists() and json.loads(stamp_file.read_text()) == stamp:
        return target_dir, draft_dir

    root.mkdir(parents=True, exist_ok=True)
    build_tokenizer(target_dir)
    tokenizer = AutoTokenizer.from_pretrained(str(target_dir))
    vocab = len(tokenizer)

    torch.manual_seed(seed)
    target = LlamaForCausalLM(_config(vocab, target_layers, hidden, "specterm-tiny-target"))
    # Larger-than-default init so the random target has confident, varied preferences.
    with torch.no_grad():
        for p in target.parameters():
            if p.dim() == 2:
                p.normal_(0.0, 0.25)
    target.save_pretrained(str(target_dir), safe_serialization=True)

    draft = LlamaForCausalLM(_config(vocab, draft_layers, hidden, "specterm-tiny-draft"))
    state = {k: v for k, v in target.state_dict().items()
             if not k.startswith("model.layers.") or int(k.split(".")[2]) < draft_layers}
    draft.load_state_dict(state)
    draft.save_pretrained(str(draft_dir), safe_serialization=True)
    tokenizer.save_pretrained(str(draft_dir))
    stamp_file.write_text(json.dumps(stamp))
    return target_dir, draft_dir
