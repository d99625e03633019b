"""The SmolLM2 agent pair (``specterm.models.smollm2_agent``): the shipped LoRA adapter merges into
the fetched base as peft runs it, and an adapter for another model is refused; the built pair runs
an agent on the real engine, speculation lossless at temperature 0 against the same target alone."""

from __future__ import annotations

from pathlib import Path

import pytest

from specterm.events import AgentStepFinished
from specterm.models.smollm2_agent import LORA_TARGETS, AgentPairError, merge_adapter


def _lora(model, rank=4):
    from peft import LoraConfig, get_peft_model

    # init_lora_weights=False: both factors random, so the adapter changes the model (peft's default
    # starts B at zero, a no-op that would merge "correctly" whatever the merge did)
    return get_peft_model(
        model, LoraConfig(r=rank, lora_alpha=2 * rank, target_modules=LORA_TARGETS, init_lora_weights=False)
    )


def test_the_adapter_merges_into_the_base_as_peft_runs_it(tiny_pair, tmp_path):
    import torch
    from transformers import AutoModelForCausalLM, LlamaConfig, LlamaForCausalLM

    base = Path(tiny_pair[0])
    torch.manual_seed(0)
    tuned = _lora(AutoModelForCausalLM.from_pretrained(base)).eval()
    tuned.save_pretrained(tmp_path / "adapter")
    layers = AutoModelForCausalLM.from_pretrained(base).config.num_hidden_layers
    assert merge_adapter(base, tmp_path / "adapter", tmp_path / "merged") == layers * len(LORA_TARGETS)

    ids = torch.arange(4, 60).unsqueeze(0)
    with torch.no_grad():
        merged = AutoModelForCausalLM.from_pretrained(tmp_path / "merged").eval()(ids).logits
        plain = AutoModelForCausalLM.from_pretrained(base).eval()(ids).logits
        assert torch.allclose(merged, tuned(ids).logits, atol=1e-4)
        assert not torch.allclose(merged, plain, atol=1e-2)

    other = LlamaConfig.from_pretrained(base)
    other.hidden_size, other.head_dim = 64, 32  # same layers and names, other shapes
    _lora(LlamaForCausalLM(other)).save_pretrained(tmp_path / "other")
    with pytest.raises(AgentPairError, match="other: the adapter does not fit the base model"):
        merge_adapter(base, tmp_path / "other", tmp_path / "bad")


# Questions in a user's own words (none is a training phrasing; lower case as people type), with
# the SQL whose result a right answer holds, or words from the doc it quotes: what right means, which
# scripts/agent_eval.py measures per machine (the tests check what holds on any path).
QUESTIONS = [
    ("sql_analyst", "how many of our customers live in Japan?", "SELECT count(*) FROM customers WHERE country = 'JP'"),
    ("sql_analyst", "How many customers are there in germany", "SELECT count(*) FROM customers WHERE country = 'DE'"),
    ("ops_assistant", "Can we deploy on Fridays?", "Thursday"),
]
DOCS_QUESTION = QUESTIONS[-1][1]
# Questions whose figure needs a query the pair gets wrong (orders have no country: it takes a join);
# measured: the query fails and the model answers "The average order value is 25.00."
HARD = [("sql_analyst", "what's the average order value for customers in Germany?")]


@pytest.fixture(scope="module")
def runs(smollm2):
    """The built pair's agent runs per question, speculative (k = 4) and target-only, fp32."""
    from specterm.agent import AgentRunner, load_agent
    from specterm.engine import EngineConfig, load_engine
    from specterm.models.smollm2_agent import ensure_smollm2_agent

    target, draft = ensure_smollm2_agent()
    out = {}
    for method in ("draft_model", None):
        config = EngineConfig(
            target=str(target), draft=str(draft), method=method, num_speculative_tokens=4, dtype="float32"
        )
        with load_engine(config) as engine:
            for agent_name, q, *_ in [*QUESTIONS, *HARD] if method else QUESTIONS:
                events: list = []
                out[method, q] = (AgentRunner(load_agent(agent_name), engine).run(q, events.append), events)
    return out


def check_answer(q, result, events):
    """What holds on whichever path the pair takes (its greedy tokens differ by CPU): it ends with an
    answer, every call it made ran, the answer step lists the figures no tool result holds, and after
    a failed call none is shown: the agent says what failed, the model's answer kept as ``withheld``."""
    from specterm.agent.grounding import ungrounded
    from specterm.events import ToolResult

    assert result.ok and result.answer, (q, result.error)
    assert [e.name for e in events if isinstance(e, ToolResult)] == [c.tool for c in result.calls], q
    answers = [e for e in events if isinstance(e, AgentStepFinished) and e.answer]
    assert answers and answers[-1].answer == result.answer
    evidence = [q, *(o.content or o.error or "" for o in result.outcomes)]
    failed = result.last_failure()
    if answers[-1].withheld is not None:
        assert failed and result.answer == f"I could not answer that: {failed[0]} failed ({failed[1]}).", result.answer
        assert ungrounded(answers[-1].withheld, evidence) == answers[-1].ungrounded != []
    else:
        assert ungrounded(result.answer, evidence) == answers[-1].ungrounded, result.answer
        assert not (answers[-1].ungrounded and failed), (result.answer, failed)


@pytest.mark.engine
def test_the_pair_is_lossless_and_its_verdicts_reconcile(runs):
    from specterm.events import EngineCounters, SpecStep

    for _, q, _ in QUESTIONS:
        spec, base = runs["draft_model", q][0], runs[None, q][0]
        assert [c.raw for c in spec.calls] == [c.raw for c in base.calls], q
        assert spec.answer == base.answer, q
    events = [e for _, q, _ in QUESTIONS for e in runs["draft_model", q][1]]
    steps = [e for e in events if isinstance(e, SpecStep)]
    drafted, accepted = sum(len(s.drafted) for s in steps), sum(s.accepted for s in steps)
    # how many drafts the target keeps depends on the tokens taken: no floor, the counts reconcile
    assert drafted > 0 and 0 <= accepted <= drafted
    counters = [e for e in events if isinstance(e, EngineCounters)]
    assert counters and all(c.matched and c.ours["accepted"] == c.vllm["accepted"] for c in counters)


@pytest.mark.engine
def test_the_pair_answers_questions_in_a_users_own_words(runs):
    """On any path an answer whose figures are checked. Whether it is the right one (the gold SQL's
    figure, the doc's sentence) depends on the tokens the pair takes on this CPU: scripts/agent_eval.py
    measures that per machine."""
    for _, q, _ in QUESTIONS:
        check_answer(q, *runs["draft_model", q])


@pytest.mark.engine
def test_after_a_failed_call_the_agent_never_answers_with_an_invented_figure(runs):
    for _, q in HARD:
        check_answer(q, *runs["draft_model", q])
