"""Bench workloads are conversations rendered by the target's template, like every other prompt;
``--raw`` and templates that only answer agent requests get text prefixes, and a model without a
template is one line before any engine loads."""

from __future__ import annotations

from pathlib import Path

import pytest

from specterm.bench.workloads import RAW, chat_requests, describe, resolve
from specterm.engine.chat import ChatPrompt, ChatTemplateError, PromptRenderer

REPO = Path(__file__).resolve().parents[1]
CHATML = (
    "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)

pytestmark = pytest.mark.engine  # needs transformers (engine extra)


@pytest.fixture()
def tokenizer():
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(REPO / "models" / "embedded" / "target"))


def test_toolcalls_are_the_agents_first_turn_with_its_tools():
    requests = chat_requests("toolcalls", "ops_assistant")
    assert all(isinstance(r, ChatPrompt) for r in requests)
    assert {t["function"]["name"] for t in requests[0].tools} == {"search_docs", "sla_budget", "capacity"}
    assert [m.role for m in requests[0].messages] == ["system", "user"]


def test_embedded_pair_renders_toolcalls_and_falls_back_to_raw_for_plain_chat(tokenizer):
    notes: list[str] = []
    out = resolve(["toolcalls", "prose", "code"], renderer=PromptRenderer(tokenizer), notes=notes.append)
    assert all(isinstance(r, ChatPrompt) for r in out["toolcalls"])
    text = PromptRenderer(tokenizer).text(out["toolcalls"][0])
    assert "How many customers are there?" in text
    assert out["prose"] == list(RAW["prose"]) and out["code"] == list(RAW["code"])
    assert len(notes) == 2 and all("raw text prefixes" in n for n in notes)


def test_a_chat_model_gets_conversations_for_every_workload(tokenizer, tmp_path):
    template = tmp_path / "chatml.jinja"
    template.write_text(CHATML)
    notes: list[str] = []
    renderer = PromptRenderer(tokenizer, template_file=str(template))
    out = resolve(["toolcalls", "prose", "code"], renderer=renderer, notes=notes.append)
    assert notes == []
    assert all(isinstance(r, ChatPrompt) for reqs in out.values() for r in reqs)
    assert "<|im_start|>user\nWrite a Python function is_prime(n)" in "".join(renderer.text(r) for r in out["code"])
    assert describe(out["prose"][0]) == out["prose"][0].messages[-1].content


def test_raw_sends_text_prefixes_and_no_template_says_raw(tokenizer):
    assert resolve(["prose"], renderer=None, raw=True) == {"prose": list(RAW["prose"])}
    tokenizer.chat_template = None
    with pytest.raises(ChatTemplateError, match="--raw"):
        resolve(["prose"], renderer=PromptRenderer(tokenizer))


def test_bench_cli_without_a_template_is_one_line_before_loading(tiny_pair, tmp_path, capsys):
    import shutil

    from specterm.cli import main

    target, _draft = tiny_pair
    bare = tmp_path / "bare"
    shutil.copytree(target, bare)
    (bare / "chat_template.jinja").unlink()
    prompts = tmp_path / "p.txt"
    prompts.write_text("Hello there\n")
    rc = main(
        ["bench", "--prompts", str(prompts), "--target", str(bare), "--methods", "ngram", "--k", "2", "--repeats", "1"]
    )
    err = capsys.readouterr().err.strip().splitlines()
    assert rc != 0 and len(err) == 1 and "--raw" in err[0]
