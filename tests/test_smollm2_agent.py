"""The SmolLM2 agent pair (``specterm.models.smollm2_agent``): the shipped delta rebuilds the
fine-tuned target over the fetched base, bit for bit; the built pair runs an agent on the real engine,
speculation lossless at temperature 0 against the same target alone."""

from __future__ import annotations

import shutil

import pytest

from specterm.models.smollm2_agent import AgentPairError, merge_delta, write_delta


def test_the_delta_holds_what_a_fine_tune_changed_and_merges_back_bitwise(tiny_pair, tmp_path):
    import torch
    from safetensors.torch import load_file, save_file

    base = tmp_path / "base.safetensors"
    shutil.copy(f"{tiny_pair[0]}/model.safetensors", base)
    weights = load_file(str(base))
    name = next(n for n in sorted(weights) if n.startswith("model.layers.") and n.endswith("q_proj.weight"))
    tuned = dict(weights)
    tuned[name] = weights[name] + 0.125
    save_file(tuned, str(tmp_path / "tuned.safetensors"))

    assert write_delta(base, tmp_path / "tuned.safetensors", tmp_path / "delta.safetensors") == [name]
    assert merge_delta(base, tmp_path / "delta.safetensors", tmp_path / "merged.safetensors") == 1
    merged = load_file(str(tmp_path / "merged.safetensors"))
    assert set(merged) == set(tuned) and all(torch.equal(merged[n], tuned[n]) for n in tuned)

    save_file({name: torch.zeros(3, 3)}, str(tmp_path / "other.safetensors"))
    with pytest.raises(AgentPairError, match=f"tensor {name} does not fit the base model"):
        merge_delta(base, tmp_path / "other.safetensors", tmp_path / "bad.safetensors")


# Questions in a user's own words (none is a training phrasing; lower case as people type), with
# the SQL whose result the answer must hold, or words from the doc it must quote.
QUESTIONS = [
    ("sql_analyst", "how many of our customers live in Japan?", "SELECT count(*) FROM customers WHERE country = 'JP'"),
    ("sql_analyst", "How many customers are there in germany", "SELECT count(*) FROM customers WHERE country = 'DE'"),
    ("ops_assistant", "Can we deploy on Fridays?", "Thursday"),
]


@pytest.fixture(scope="module")
def runs(smollm2):
    """The built pair's agent runs per question, speculative (k = 4) and target-only, fp32."""
    from specterm.agent import AgentRunner, load_agent
    from specterm.engine import EngineConfig, load_engine
    from specterm.models.smollm2_agent import ensure_smollm2_agent

    target, draft = ensure_smollm2_agent()
    out = {}
    for method in ("draft_model", None):
        config = EngineConfig(target=str(target), draft=str(draft), method=method, num_speculative_tokens=4,
                              dtype="float32")
        with load_engine(config) as engine:
            for agent_name, q, _ in QUESTIONS:
                events: list = []
                out[method, q] = (AgentRunner(load_agent(agent_name), engine).run(q, events.append), events)
    return out


@pytest.mark.engine
def test_the_pair_is_lossless_and_its_draft_is_accepted(runs):
    from specterm.events import SpecStep

    for _, q, _ in QUESTIONS:
        spec, base = runs["draft_model", q][0], runs[None, q][0]
        assert [c.raw for c in spec.calls] == [c.raw for c in base.calls], q
        assert spec.answer == base.answer, q
    steps = [e for _, q, _ in QUESTIONS for e in runs["draft_model", q][1] if isinstance(e, SpecStep)]
    drafted, accepted = sum(len(s.drafted) for s in steps), sum(s.accepted for s in steps)
    assert drafted > 0 and accepted > 0.5 * drafted


@pytest.mark.engine
def test_the_pair_answers_questions_in_a_users_own_words(runs):
    from specterm.agent import load_agent
    from specterm.agent.tools import ToolBox

    db = ToolBox(load_agent("sql_analyst")).db()
    for agent_name, q, gold in QUESTIONS:
        result = runs["draft_model", q][0]
        assert result.calls and result.answer, q
        if agent_name == "sql_analyst":
            assert result.calls[-1].tool == "query_sql"
            gold = db.query(gold)[0].split("\n")[1]
        assert gold in result.answer, (q, result.answer)
