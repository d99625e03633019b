"""Agent definitions, the prompt format, the call shape and input validation (no engine needed)."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest

from specterm.agent.loader import REPO_AGENTS, list_agents, load_agent
from specterm.agent.loop import validate_request
from specterm.agent.prompt import call_schema, parse_call, render_prompt
from specterm.errors import ConfigError
from specterm.events import Passage

GOOD = """\
system = "You test things."
[[tools]]
name = "capacity"
description = "Replicas needed."
handler = "ops.capacity"
[tools.parameters]
type = "object"
required = ["peak_rps", "rps_per_replica"]
additionalProperties = false
properties.peak_rps = { type = "number", minimum = 0 }
properties.rps_per_replica = { type = "number", minimum = 1 }
"""


def write_agent(root: Path, name: str, text: str) -> Path:
    (root / name).mkdir(parents=True, exist_ok=True)
    (root / name / "agent.toml").write_text(text)
    return root / name / "agent.toml"


@pytest.fixture
def agents_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("SPECTERM_AGENTS_DIR", str(tmp_path))
    return tmp_path


def test_shipped_agents_load():
    assert {"sql_analyst", "ops_assistant"} <= set(list_agents())
    sql = load_agent("sql_analyst")
    assert [t.name for t in sql.tools] == ["list_tables", "describe_table", "query_sql"]
    assert sql.sql_script.is_file() and sql.retrieval.top_k >= 1
    ops = load_agent("ops_assistant")
    assert {"search_docs", "sla_budget", "capacity"} == {t.name for t in ops.tools}
    assert len(list(ops.docs_dir.glob("*.md"))) >= 5


def test_an_agent_is_a_folder_in_the_agents_dir(agents_dir):
    write_agent(agents_dir, "mine", "max_steps = 2\n" + GOOD)
    assert "mine" in list_agents()
    agent = load_agent("mine")
    assert agent.path == agents_dir / "mine" and agent.tools[0].name == "capacity"


def test_user_dir_shadows_a_shipped_agent(agents_dir):
    write_agent(agents_dir, "ops_assistant", GOOD.replace("You test things.", "shadowed"))
    assert load_agent("ops_assistant").system == "shadowed"


@pytest.mark.parametrize(
    "text, field, words",
    [
        (GOOD.replace('type = "object"\nrequired', 'type = "objekt"\nrequired'), "tools[0].parameters", "JSON Schema"),
        (GOOD.replace('"ops.capacity"', '"ops.nope"'), "tools[0].handler", "unknown handler"),
        (GOOD.replace('system = "You test things."', ""), "system", "Field required"),
        (GOOD.replace('name = "capacity"', 'name = "Bad Name"'), "tools[0].name", "lowercase"),
        ("max_steps = 0\n" + GOOD, "max_steps", "greater than or equal"),
        ("colour = 'red'\n" + GOOD, "colour", "Extra inputs"),
        (GOOD.replace('handler = "ops.capacity"', 'handler = "sql.query"'), "(top level)", "[database]"),
        (GOOD + GOOD[GOOD.index("[[tools]]") :], "(top level)", "duplicate tool names"),
        (GOOD + "[retrieval]\ntop_k = 2\ndocs = 'nowhere'\n", "retrieval.docs", "no *.md"),
        ('name = "other"\n' + GOOD, "name", "folder name"),
        (GOOD + "[database]\nsql = 'missing.sql'\n", "database.sql", "not found"),
        ("system = [unclosed", "", "not valid TOML"),
    ],
)
def test_a_broken_definition_names_the_file_and_the_field(agents_dir, text, field, words):
    path = write_agent(agents_dir, "broken", text)
    with pytest.raises(ConfigError) as info:
        load_agent("broken")
    message = str(info.value)
    assert message.startswith(f"{path}: {field}"), message
    assert words in message and "\n" not in message


def test_unknown_agent_lists_the_known_ones():
    with pytest.raises(ConfigError, match="no agent named 'nobody'.*sql_analyst"):
        load_agent("nobody")


def test_render_prompt_is_the_documented_deterministic_format():
    agent = load_agent("ops_assistant")
    history = [
        ("user", "Budget for 99.9?"),
        ("call", '{"tool":"sla_budget","arguments":{}}'),
        ("result", "error: bad arguments"),
    ]
    passages = [Passage(doc="error_budget.md", score=0.7, text="A 99.9% SLO allows 43.2 minutes.")]
    prompt = render_prompt(agent, history, passages)
    assert prompt == render_prompt(agent, list(history), list(passages))
    lines = prompt.splitlines()
    assert lines[0] == "<|system|>" and lines[-1] == "<|call|>" and prompt.endswith("<|call|>\n")
    assert (
        "- sla_budget(slo_percent: number 50..99.999, window_days: integer 1..366, "
        "consumed_minutes?: number 0..100000): Error-budget minutes for an SLO over a window." in lines
    )
    tail = lines[lines.index("<|context|>") :]
    assert tail == [
        "<|context|>",
        "[error_budget.md] A 99.9% SLO allows 43.2 minutes.",
        "<|user|>",
        "Budget for 99.9?",
        "<|call|>",
        '{"tool":"sla_budget","arguments":{}}',
        "<|result|>",
        "error: bad arguments",
        "<|call|>",
    ]


def test_call_schema_is_a_union_of_tools_and_the_answer():
    agent = load_agent("sql_analyst")
    schema = call_schema(agent)
    jsonschema.Draft202012Validator.check_schema(schema)
    assert len(schema["anyOf"]) == len(agent.tools) + 1
    ok = parse_call(agent, '{"tool":"query_sql","arguments":{"sql":"SELECT 1"}}')
    assert (ok.tool, ok.arguments) == ("query_sql", {"sql": "SELECT 1"})
    assert parse_call(agent, '{"answer":"42"}').answer == "42"
    for bad in (
        '{"tool":"query_sql","arguments":{}}',
        '{"tool":"rm","arguments":{}}',
        '{"tool":"query_sql","arguments":{"sql":"x"},"extra":1}',
        '{"answer":',
        "[]",
    ):
        with pytest.raises(ValueError):
            parse_call(agent, bad)
    only = call_schema(agent, answer_only=True)
    assert "anyOf" not in only and only["required"] == ["answer"]
    with pytest.raises(ValueError):
        parse_call(agent, '{"tool":"list_tables","arguments":{}}', answer_only=True)


@pytest.mark.parametrize(
    "text, words",
    [
        ("", "empty request"),
        ("   \n\t ", "empty request"),
        ("x" * 8193, "too large: 8193 bytes"),
        ("é" * 4097, "too large: 8194 bytes"),
        ("bin\x00ary", "control character U+0000"),
        ("esc \x1b[31m", "control character U+001B"),
        ("bad \udcff bytes", "not valid UTF-8"),
    ],
)
def test_bad_input_is_refused_with_one_line(text, words):
    reason = validate_request(text)
    assert reason is not None and words in reason and "\n" not in reason


def test_good_input_passes():
    assert validate_request("How many orders?\nPer\tcountry, please.") is None
    assert validate_request("x" * 8192) is None


def test_shipped_sql_script_is_what_the_generator_writes(tmp_path):
    import runpy

    script = REPO_AGENTS / "sql_analyst" / "data" / "make_shop_sql.py"
    module = runpy.run_path(str(script))
    assert module["generate"]() == (script.parent / "shop.sql").read_text(encoding="utf-8")


def test_hub_models_get_the_name_key_and_the_agent_format_keeps_tool():
    from specterm.agent.prompt import agent_chat_template, build_chat, call_key_for

    agent = load_agent("sql_analyst")
    assert call_key_for(agent_chat_template()) == "tool" and call_key_for(None) == "tool"
    chatml = "{% for m in messages %}<|im_start|>{{ m.role }}{% endfor %}{% if tools %}<tool_call>{% endif %}"
    assert call_key_for(chatml) == "name"
    call = parse_call(agent, '{"name":"query_sql","arguments":{"sql":"SELECT 1"}}', key="name")
    assert call.tool == "query_sql" and call.arguments == {"sql": "SELECT 1"}
    with pytest.raises(ValueError):
        parse_call(agent, '{"tool":"query_sql","arguments":{"sql":"SELECT 1"}}', key="name")
    system = build_chat(agent, [("user", "hi")], [], key="name").messages[0].content
    assert system.endswith('Reply with one JSON object: {"name": NAME, "arguments": {...}} or {"answer": TEXT}.')


def test_tool_first_leaves_the_first_generation_no_answer_branch(tmp_path):
    from specterm.agent.scaffold import scaffold

    agent = load_agent(str(scaffold("measurer", tmp_path)))
    assert agent.tool_first  # the scaffold asks for it: a general model would answer from memory
    first = call_schema(agent, call_only=True)
    answer = '{"answer": "four"}'
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(json.loads(answer), first)
    with pytest.raises(ValueError):
        parse_call(agent, answer, call_only=True)
    call = '{"tool": "word_stats", "arguments": {"text": "a b"}}'
    assert parse_call(agent, call, call_only=True).tool == "word_stats"
    assert parse_call(agent, answer).answer == "four"  # later generations may answer
    assert parse_call(agent, answer, answer_only=True, call_only=True).answer == "four"  # the last one must
