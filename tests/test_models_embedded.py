"""The embedded pair (``models/embedded``): reproducible training, and the committed weights on the
real vLLM engine — loads, speculative ≡ target-only on agent requests (greedy, fp32), tool-call
verdicts that reconcile with vLLM's counters, and a multi-step SQL question that ends in an answer
stating only what the tools returned, or saying what failed.

The weights are the same everywhere, but the tokens greedy decoding picks are not: float kernels
differ by instruction set (an AVX2-only CPU took another path than an AVX-512 one), so how well the
pair answers is measured per machine (``scripts/agent_eval.py``), not asserted here."""

from __future__ import annotations

import json

import pytest

from specterm.paths import embedded_pair_dir

ROOT = embedded_pair_dir()
HAS_PAIR = (ROOT / "target" / "config.json").is_file()
# (agent, question): a 4-step SQL flow, a 2-step SQL flow, and a calculator.
QUESTIONS = [
    ("sql_analyst", "Which product category has the highest captured revenue?"),
    ("sql_analyst", "How many customers are from Germany?"),
    ("ops_assistant", "How many replicas do we need for 1000 rps peak at 150 rps per replica?"),
]


def test_quick_training_is_reproducible(tmp_path):
    pytest.importorskip("torch")
    from specterm.models.training.train import QUICK, train_pair

    a = train_pair(tmp_path / "a", QUICK, log=lambda m: None)
    b = train_pair(tmp_path / "b", QUICK, log=lambda m: None)
    for role in ("target", "draft"):
        assert abs(a[role]["final_loss"] - b[role]["final_loss"]) < 1e-4
    assert a["eval"] == b["eval"]
    assert (tmp_path / "a" / "target" / "model.safetensors").is_file()
    assert json.loads((tmp_path / "a" / "train.json").read_text())["settings"]["seed"] == 0


def test_corpus_calls_are_compact_json_and_multistep():
    from specterm.models.training.corpus import generate

    ts = generate(seed=1, n_sql=30, n_ops=10)
    assert max(len(t.calls) for t in ts) >= 4  # list_tables → describe_table → query_sql → answer
    for t in ts:
        for s, e in t.calls:
            call = t.text[s:e]
            assert json.dumps(json.loads(call), separators=(",", ":"), ensure_ascii=False) == call


@pytest.mark.skipif(not HAS_PAIR, reason="models/embedded is not installed")
def test_corpus_in_a_models_own_chat_format(tmp_path):
    """``generate(render=...)`` writes the same transcripts in a model's chat template (a ChatML
    template here) with its call key; the trained spans are each call and the end of turn after it."""
    from transformers import AutoTokenizer

    from specterm.engine.chat import PromptRenderer
    from specterm.models.training.corpus import Render, generate

    template = tmp_path / "chatml.jinja"
    template.write_text(
        "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
        "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
    )
    renderer = PromptRenderer(AutoTokenizer.from_pretrained(ROOT / "target"), template_file=str(template))
    render = Render.chat(renderer, end="<|im_end|>")  # this tokenizer's EOS is not the template's
    ts = generate(seed=1, n_sql=12, n_ops=6, render=render)
    assert render.key == "name" and max(len(t.calls) for t in ts) >= 2
    for t in ts:
        assert t.text.startswith("<|im_start|>system\n")
        for s, e in t.calls:
            span = t.text[s:e]
            assert span.endswith("<|im_end|>") and t.text[:s].endswith("<|im_start|>assistant\n")
            call = json.loads(span[: -len("<|im_end|>")])
            assert "tool" not in call and ("answer" in call or set(call) == {"name", "arguments"})


@pytest.mark.skipif(not HAS_PAIR, reason="models/embedded is not installed")
def test_embedded_pair_is_the_small_pair_and_small():
    from specterm.models.defaults import small_model_paths

    assert small_model_paths() == (ROOT / "target", ROOT / "draft")
    size = sum(f.stat().st_size for f in ROOT.rglob("*") if f.is_file())
    assert size < 30e6
    report = json.loads((ROOT / "train.json").read_text())
    assert report["target"]["params"] > 3 * report["draft"]["params"]


@pytest.fixture(scope="module")
def runs():
    """AgentRunner results and events per question, speculative (k=4) and target-only, fp32."""
    from specterm.agent import AgentRunner, load_agent
    from specterm.engine import EngineConfig, load_engine

    out = {}
    for method in ("draft_model", None):
        config = EngineConfig(
            target=str(ROOT / "target"),
            draft=str(ROOT / "draft"),
            method=method,
            num_speculative_tokens=4,
            dtype="float32",
        )
        with load_engine(config) as engine:
            for agent_name, q in QUESTIONS:
                events: list = []
                result = AgentRunner(load_agent(agent_name), engine).run(q, events.append)
                out[method, q] = (result, events)
    return out


@pytest.mark.engine
@pytest.mark.skipif(not HAS_PAIR, reason="models/embedded is not installed")
def test_speculative_calls_equal_target_only(runs):
    for _, q in QUESTIONS:
        spec, base = runs["draft_model", q][0], runs[None, q][0]
        assert [c.raw for c in spec.calls] == [c.raw for c in base.calls], q
        assert spec.answer == base.answer, q


@pytest.mark.engine
@pytest.mark.skipif(not HAS_PAIR, reason="models/embedded is not installed")
def test_tool_call_verdicts_reconcile_with_vllms_counters(runs):
    """Not a floor on the acceptance rate (which tokens the pair takes is the CPU's, and acceptance
    with them): the tool-call steps' rate is a rate, and every request's verdicts equal vLLM's counters."""
    from specterm.events import AgentStepStarted, EngineCounters, SpecStep
    from specterm.stats import SpecStats

    stats, counters = SpecStats(), []
    for _, q in QUESTIONS:
        kind = None
        for e in runs["draft_model", q][1]:
            if isinstance(e, AgentStepStarted):
                kind = e.kind
            elif isinstance(e, EngineCounters):
                counters.append(e)
            elif isinstance(e, SpecStep) and kind == "tool_call":
                stats.add_step(e)
    assert counters and all(c.matched for c in counters), [c.detail for c in counters if not c.matched]
    assert all(c.ours["accepted"] == c.vllm["accepted"] for c in counters)
    assert stats.acceptance_rate is not None and 0 <= stats.acceptance_rate <= 1


@pytest.mark.engine
@pytest.mark.skipif(not HAS_PAIR, reason="models/embedded is not installed")
def test_multistep_sql_question_ends_in_an_answer_whose_figures_are_checked(runs):
    """Whichever path the pair takes on this CPU: it ends with an answer; every call it made ran and
    came back; the answer step lists the figures no tool result holds; and after a failed call no
    such figure is shown: the agent says what failed, the model's answer kept as ``withheld``."""
    from specterm.agent.grounding import ungrounded
    from specterm.events import AgentStepFinished, ToolResult

    q = QUESTIONS[0][1]
    result, events = runs["draft_model", q]
    assert result.ok and result.answer is not None, result.error
    assert [e.name for e in events if isinstance(e, ToolResult)] == [c.tool for c in result.calls]
    answer = [e for e in events if isinstance(e, AgentStepFinished) and e.answer is not None][-1]
    assert answer.answer == result.answer
    evidence = [q, *(o.content or o.error or "" for o in result.outcomes)]
    failed = result.last_failure()
    if answer.withheld is None:  # shown as the model wrote it
        assert ungrounded(result.answer, evidence) == answer.ungrounded, result.answer
        assert not (answer.ungrounded and failed), (result.answer, failed)
    else:  # invented after a failed call
        assert failed and result.answer == f"I could not answer that: {failed[0]} failed ({failed[1]}).", result.answer
        assert ungrounded(answer.withheld, evidence) == answer.ungrounded != []
