"""``engine/spelling.py``: forced text spelt as the target spelt it, with the tiny pair's real tokenizer."""

from __future__ import annotations

import pytest

from specterm.engine.spelling import Spelling


@pytest.fixture(scope="module")
def tokenizer(tiny_pair):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(tiny_pair[0])


def test_unlearned_text_is_tokenised_on_its_own(tokenizer):
    text = '","arguments":{"sql":"'
    tokens, keys = Spelling(tokenizer).tokens(text, None, 64)
    assert tokenizer.decode(tokens) == text
    assert keys[0] == (None, text) and all(k is not None for k in keys)
    assert Spelling(tokenizer).tokens(text, None, 2)[0] == tokens[:2]


def test_a_learned_spelling_is_used_in_its_context_only(tokenizer):
    text = '":"'
    spelling = Spelling(tokenizer)
    plain, _ = spelling.tokens(text, 7, 64)
    quote = tokenizer.encode('"', add_special_tokens=False)
    assert len(quote) == 1 and plain[0] != quote[0], "the tokenizer must spell it another way on its own"
    spelling.learn((7, text), quote[0])
    learned, keys = spelling.tokens(text, 7, 64)
    assert learned[0] == quote[0] and tokenizer.decode(learned) == text
    assert keys[1] == (quote[0], text[1:])
    assert spelling.tokens(text, 8, 64)[0] == plain  # another token before it: not learned there


def test_a_token_that_does_not_spell_the_text_is_not_learned(tokenizer):
    spelling = Spelling(tokenizer)
    other = tokenizer.encode("SELECT", add_special_tokens=False)[0]
    spelling.learn((None, '":"'), other)
    assert spelling.tokens('":"', None, 8)[0] == tokenizer.encode('":"', add_special_tokens=False)
