"""A real pretrained instruct model end to end: SmolLM2-135M-Instruct (imported from its GGUF, see
``test_models_import``) answers real questions through its own chat template, target-only, with
``ngram`` speculation and with itself as the draft; speculation is lossless at temperature 0 and the
verdicts reconcile with vLLM's counters (the engine raises on a mismatch)."""

from __future__ import annotations

import pytest

from specterm.engine import EngineConfig, GenerationParams, load_engine
from specterm.engine.chat import ChatPrompt
from specterm.events import SpecStep

pytestmark = pytest.mark.engine

QUESTIONS = [
    "What is the capital of France?",
    "Write a Python function is_prime(n) that returns True when n is prime.",
]


@pytest.fixture(scope="module")
def answers(smollm2):
    out = {}
    for method, draft in ((None, None), ("ngram", None), ("draft_model", smollm2)):
        config = EngineConfig(target=smollm2, draft=draft, method=method, num_speculative_tokens=4)
        with load_engine(config) as engine:
            runs = []
            for q in QUESTIONS:
                events: list = []
                finished = engine.generate(ChatPrompt.user(q), GenerationParams(max_tokens=48), events.append)
                runs.append((finished, [e for e in events if isinstance(e, SpecStep)]))
            out[method] = runs
    return out


def test_the_model_answers_through_its_chat_template(answers):
    finished, _steps = answers[None][0]
    assert "Paris" in finished.text  # raw text completion would continue the question instead
    code, _ = answers[None][1]
    assert "def is_prime" in code.text


@pytest.mark.parametrize("method", ["ngram", "draft_model"])
def test_speculation_is_lossless_on_a_real_model(answers, method):
    for (ref, ref_steps), (got, steps) in zip(answers[None], answers[method]):
        assert [t.id for s in steps for t in s.tokens] == [t.id for s in ref_steps for t in s.tokens]
        assert got.text == ref.text


def test_itself_as_draft_accepts_every_draft(answers):
    steps = [s for _f, run in answers["draft_model"] for s in run]
    drafted, accepted = sum(len(s.drafted) for s in steps), sum(s.accepted for s in steps)
    assert drafted > 0 and accepted >= 0.98 * drafted
