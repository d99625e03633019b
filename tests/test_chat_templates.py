"""Every prompt goes through the target's chat template (``engine/chat.py``): the embedded pair's
template renders exactly the trained agent format, templates that lack tools/documents still see
them, and each way a prompt can fail is one line before anything is recorded."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from specterm.agent.prompt import agent_chat_template

REPO = Path(__file__).resolve().parents[1]
CHATML = (
    "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


def test_shipped_pair_carries_the_agent_template():
    for role in ("target", "draft"):
        assert (REPO / "models" / "embedded" / role / "chat_template.jinja").read_text() == agent_chat_template()


@pytest.fixture(scope="module")
def tokenizer():
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(REPO / "models" / "embedded" / "target"))


@pytest.mark.engine
@pytest.mark.parametrize("agent_name", ["sql_analyst", "ops_assistant"])
def test_agent_template_renders_exactly_the_trained_format(tokenizer, agent_name):
    from specterm.agent import load_agent
    from specterm.agent.prompt import build_chat, render_prompt
    from specterm.engine.chat import PromptRenderer
    from specterm.events import Passage

    agent = load_agent(agent_name)
    renderer = PromptRenderer(tokenizer)
    passages = [
        Passage(doc="runbook.md", text="Restart the worker, then check the queue.", score=0.7),
        Passage(doc="faq.md", text="Refunds take 5 days.", score=0.5),
    ]
    history = [
        ("user", "How many orders are there?"),
        ("call", '{"tool":"query_sql","arguments":{"sql":"SELECT count(*) FROM orders"}}'),
        ("result", "count(*)\n400\n(1 rows)"),
        ("call", '{"tool":"query_sql","arguments":{"sql":"SELECT 1"}}'),
        ("result", "error: no such table"),
    ]
    for turns in (history[:1], history[:3], history):
        for ps in ([], passages):
            assert renderer.text(build_chat(agent, turns, ps)) == render_prompt(agent, turns, ps)


@pytest.mark.engine
def test_agent_template_refuses_plain_chat_in_one_line(tokenizer):
    from specterm.engine.chat import ChatPrompt, ChatTemplateError, PromptRenderer

    with pytest.raises(ChatTemplateError) as err:
        PromptRenderer(tokenizer, model="m").text(ChatPrompt.user("How many customers are from Japan?"))
    message = str(err.value)
    assert "\n" not in message and "only answers agent requests" in message and "--agent" in message


@pytest.mark.engine
def test_tools_and_documents_are_folded_into_the_system_message_when_the_template_lacks_them(tokenizer, tmp_path):
    from specterm.engine.chat import ChatPrompt, Message, PromptRenderer, tool_spec

    template = tmp_path / "chatml.jinja"
    template.write_text(CHATML)
    renderer = PromptRenderer(tokenizer, template_file=str(template))
    chat = ChatPrompt(
        messages=[Message(role="system", content="Be brief."), Message(role="user", content="hi")],
        tools=[tool_spec("query_sql", "Run SQL.", {"type": "object", "properties": {"sql": {"type": "string"}}})],
        documents=[{"title": "faq.md", "text": "Refunds take 5 days."}],
    )
    text = renderer.text(chat)
    assert text.startswith("<|im_start|>system\nBe brief.\n\nTools:\n- query_sql: Run SQL.")
    assert "Context:\n[faq.md] Refunds take 5 days.<|im_end|>" in text
    assert text.endswith("<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n")
    # Rendered text is tokenized without special tokens being added a second time.
    assert renderer.ids(chat) == tokenizer(text, add_special_tokens=False)["input_ids"]


@pytest.mark.engine
def test_no_template_and_a_raising_template_are_one_line(tokenizer, tmp_path):
    from specterm.engine.chat import ChatPrompt, ChatTemplateError, PromptRenderer

    tokenizer = type(tokenizer).from_pretrained(str(REPO / "models" / "embedded" / "target"))
    tokenizer.chat_template = None
    with pytest.raises(ChatTemplateError, match="has no chat template: .*--raw.*--chat-template"):
        PromptRenderer(tokenizer).text(ChatPrompt.user("hi"))
    assert PromptRenderer(tokenizer).text("raw text") == "raw text"
    broken = tmp_path / "broken.jinja"
    broken.write_text("{{ messages[0].content | nosuchfilter }}")
    with pytest.raises(ChatTemplateError, match="chat template refused the prompt") as err:
        PromptRenderer(tokenizer, template_file=str(broken)).text(ChatPrompt.user("hi"))
    assert "\n" not in str(err.value)
    with pytest.raises(ChatTemplateError, match="cannot read chat template file"):
        PromptRenderer(tokenizer, template_file=str(tmp_path / "missing.jinja"))


def _run_main(capsys, *argv):
    from specterm.cli import main

    rc = main(["run", *argv])
    return rc, capsys.readouterr().err.strip().splitlines()


@pytest.mark.engine
def test_run_plain_chat_on_the_agent_only_pair_is_one_line_and_records_nothing(capsys, tiny_pair, tmp_path):
    record = tmp_path / "s.jsonl"
    rc, err = _run_main(
        capsys,
        "How many customers are from Japan?",
        "--target",
        tiny_pair[0],
        "--draft",
        tiny_pair[1],
        "--record",
        str(record),
    )
    assert rc != 0 and len(err) == 1 and "only answers agent requests" in err[0], err
    assert not record.exists()


@pytest.mark.engine
def test_run_without_a_template_says_raw_and_raw_works(capsys, tiny_pair, tmp_path):
    target = tmp_path / "no-template"
    shutil.copytree(tiny_pair[0], target)
    (target / "chat_template.jinja").unlink()
    rc, err = _run_main(capsys, "hi", "--target", str(target), "--no-spec", "--no-record")
    assert rc != 0 and len(err) == 1 and "--raw" in err[0], err
    rc, err = _run_main(
        capsys, "The customer", "--raw", "--target", str(target), "--no-spec", "--max-tokens", "4", "--no-record"
    )
    assert rc == 0, err


@pytest.mark.engine
def test_prompt_longer_than_the_context_is_one_line_naming_the_limit(capsys, tiny_pair, tmp_path):
    record = tmp_path / "s.jsonl"
    rc, err = _run_main(
        capsys,
        "SELECT name FROM orders; " * 1200,
        "--raw",
        "--target",
        tiny_pair[0],
        "--draft",
        tiny_pair[1],
        "--record",
        str(record),
    )
    assert rc != 0 and len(err) == 1, err
    assert "the model's context is 1024 tokens" in err[0] and "--max-model-len" in err[0]
    assert not record.exists()


def test_chat_plain_mode_on_the_agent_only_pair_is_refused_before_the_ui(capsys):
    pytest.importorskip("transformers")
    from specterm.cli import main

    rc = main(["chat", "--agent", "none", "--no-record", "--no-gpu"])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc != 0 and len(err) == 1 and "only answers agent requests" in err[0], err


def test_chat_opens_the_default_agent(monkeypatch):
    import specterm.ui.app as ui_app
    from specterm.cli import build_parser

    captured = {}
    monkeypatch.setattr(ui_app.SpecTermApp, "run", lambda self, *a, **kw: captured.update(app=self))
    args = build_parser().parse_args(
        ["chat", "--target", "/models/t", "--draft", "/models/d", "--no-gpu", "--no-record"]
    )
    assert args.agent == "sql_analyst"
    assert args.func(args) == 0
    assert captured["app"].session.header.agent == "sql_analyst"
    app = captured["app"]
    assert app.intro.startswith("Agent sql_analyst: ") and "\nTry: How many customers are there?" in app.intro
    assert app.placeholder == "Ask the agent…"


def test_the_console_greets_a_newcomer_with_the_agent_and_a_question_at_80x24():
    import asyncio

    from doubles import FakeEngine

    from specterm.ui.app import make_app

    async def main():
        app = make_app(
            engine=FakeEngine(),
            gpu=False,
            theme_dirs=(),
            deterministic=True,
            intro="Agent sql_analyst: answers questions.\nTry: How many customers are there?",
        )
        async with app.run_test(size=(80, 24)) as pilot:
            await pilot.pause()
            transcript = app.query_one("#transcript")
            shown = " ".join(transcript.render_line(y).text.strip() for y in range(transcript.size.height))
            # all of it drawn inside the transcript of an 80x24 terminal, none cut off
            assert "Try: How many customers are there?" in shown and "legend below" in shown
            assert "commands." in shown

    asyncio.run(main())
