"""``bench --requests FILE.jsonl``: OpenAI chat-completions bodies as a workload. Every honoured field
becomes what vLLM's server would make of it; a line that cannot be honoured is reported by number and
the rest run. The shipped example file parses whole, and renders through a real chat template."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from specterm.bench.requests_file import DEFAULT_MAX_TOKENS, parse_line, read_requests
from specterm.errors import ConfigError

EXAMPLE = Path(__file__).resolve().parent.parent / "benchmarks" / "requests" / "shop_assistant.jsonl"
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "lookup_order",
            "description": "one order",
            "parameters": {"type": "object", "properties": {"order_id": {"type": "integer"}}, "required": ["order_id"]},
        },
    },
    {
        "type": "function",
        "function": {"name": "search", "parameters": {"type": "object", "properties": {"q": {"type": "string"}}}},
    },
]
USER = [{"role": "user", "content": "where is order 7?"}]


def line(**body) -> str:
    return json.dumps({"messages": USER, **body})


def test_every_field_becomes_what_the_server_would_run():
    r = parse_line(
        1,
        line(
            max_tokens=32,
            temperature=0.5,
            seed=3,
            stop="END",
            model="x",
            stream=True,
            user="u",
            top_p=1,
            frequency_penalty=0,
            presence_penalty=0.0,
        ),
    )  # no-op values are fine
    assert (r.params.max_tokens, r.params.temperature, r.params.seed, r.params.stop) == (32, 0.5, 3, ["END"])
    assert r.params.json_schema is None and r.constraint == "none" and r.prompt.tools is None
    assert parse_line(1, line()).params.max_tokens == DEFAULT_MAX_TOKENS
    assert parse_line(1, line(max_completion_tokens=9, max_tokens=99)).params.max_tokens == 9
    # named tool_choice: the function's parameters, as vLLM constrains it
    named = parse_line(2, line(tools=TOOLS, tool_choice={"type": "function", "function": {"name": "lookup_order"}}))
    assert named.constraint == "tool lookup_order" and named.params.json_schema == TOOLS[0]["function"]["parameters"]
    assert [t["function"]["name"] for t in named.prompt.tools] == ["lookup_order", "search"]
    # required: an array of one or more calls, each one of the tools
    required = parse_line(3, line(tools=TOOLS, tool_choice="required")).params.json_schema
    assert required["type"] == "array" and required["minItems"] == 1
    assert [b["properties"]["name"]["enum"] for b in required["items"]["anyOf"]] == [["lookup_order"], ["search"]]
    # auto: tools rendered, output free; none: no tools at all
    assert parse_line(4, line(tools=TOOLS, tool_choice="auto")).params.json_schema is None
    assert parse_line(4, line(tools=TOOLS, tool_choice="none")).prompt.tools is None
    schema = {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}
    fmt = parse_line(5, line(response_format={"type": "json_schema", "json_schema": {"name": "x", "schema": schema}}))
    assert fmt.constraint == "json_schema" and fmt.params.json_schema == schema
    assert parse_line(6, line(response_format={"type": "json_object"})).params.json_schema == {"type": "object"}


def test_messages_as_templates_take_them():
    msgs = [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": [{"type": "text", "text": "where is "}, {"type": "text", "text": "order 7?"}]},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "lookup_order", "arguments": '{"order_id": 7}'}}
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": '{"status": "shipped"}'},
    ]
    r = parse_line(1, json.dumps({"messages": msgs, "tools": TOOLS}))
    assert [m.role for m in r.prompt.messages] == ["system", "user", "assistant", "tool"]
    assert r.prompt.messages[1].content == "where is order 7?"
    assert r.prompt.messages[2].tool_calls == [
        {"type": "function", "function": {"name": "lookup_order", "arguments": {"order_id": 7}}}
    ]


@pytest.mark.parametrize(
    "body, why",
    [
        ("{not json", "not JSON"),
        ("[1, 2]", "not a JSON object"),
        (line(logit_bias={"1": 2}), "unknown or unsupported field 'logit_bias'"),
        (line(top_p=0.9), "top_p 0.9 cannot be honoured"),
        (line(presence_penalty=0.5), "presence_penalty 0.5 cannot be honoured"),
        (line(n=2), "bad n:"),
        (json.dumps({"messages": []}), "bad messages:"),
        (
            json.dumps({"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}]}),
            "only text content parts are supported",
        ),
        (json.dumps({"messages": [{"role": "user", "content": "hi", "audio": {}}]}), "unknown message field 'audio'"),
        (
            line(tools=TOOLS, tool_choice={"type": "function", "function": {"name": "nope"}}),
            "tool_choice names 'nope', which is not in tools",
        ),
        (line(tool_choice="required"), 'tool_choice "required" with no tools'),
        (
            line(
                tools=[
                    {
                        "type": "function",
                        "function": {
                            "name": "f",
                            "parameters": {"type": "object", "properties": {"a": {"type": "strin"}}},
                        },
                    }
                ],
                tool_choice={"type": "function", "function": {"name": "f"}},
            ),
            "the grammar backend cannot compile its schema",
        ),
        (
            line(
                response_format={"type": "json_schema", "json_schema": {"name": "x", "schema": {"$ref": "#/defs/gone"}}}
            ),
            "the grammar backend cannot compile its schema",
        ),
        (line(temperature=9), "bad temperature:"),
    ],
)
def test_a_line_that_cannot_be_honoured_says_why(body, why):
    with pytest.raises(ValueError, match=None) as err:
        parse_line(1, body)
    assert why in str(err.value), str(err.value)


def test_bad_lines_are_reported_by_number_and_the_rest_run(tmp_path):
    f = tmp_path / "traffic.jsonl"
    f.write_text("\n".join([line(max_tokens=8), line(logit_bias={}), "", "{oops", line(tools=TOOLS)]) + "\n")
    ok, bad = read_requests(f)
    assert [r.line for r in ok] == [1, 5]
    assert bad == [
        "line 2: unknown or unsupported field 'logit_bias'",
        "line 4: not JSON (Expecting property name enclosed in double quotes)",
    ]
    f.write_text(line(n=3) + "\n")
    with pytest.raises(ConfigError, match="no request can run \\(line 1: bad n"):
        read_requests(f)
    with pytest.raises(ConfigError, match="cannot read --requests file"):
        read_requests(tmp_path / "missing.jsonl")


def test_the_shipped_example_parses_whole_and_renders_through_a_real_template(smollm2):
    from transformers import AutoTokenizer

    from specterm.engine.chat import PromptRenderer

    ok, bad = read_requests(EXAMPLE)
    assert not bad and len(ok) >= 8
    assert {r.constraint.split()[0] for r in ok} >= {"none", "tool", "tools", "json_schema", "json_object"}
    renderer = PromptRenderer(AutoTokenizer.from_pretrained(smollm2), model="SmolLM2")
    for r in ok:
        text = renderer.text(r.prompt)
        assert r.prompt.messages[-1].content.split()[0] in text
    # an assistant's tool call reaches the model (as its template writes it, or folded into the text)
    turn = next(r for r in ok if any(m.tool_calls for m in r.prompt.messages))
    assert "lookup_order" in renderer.text(turn.prompt) and "3301" in renderer.text(turn.prompt)


@pytest.mark.engine
def test_bench_runs_a_request_file_on_the_real_engine(smollm2, tmp_path, capsys):
    from specterm.cli import main

    f = tmp_path / "traffic.jsonl"
    f.write_text(
        "\n".join(
            [
                line(max_tokens=12),
                line(
                    tools=TOOLS, tool_choice={"type": "function", "function": {"name": "lookup_order"}}, max_tokens=40
                ),
                line(frequency_penalty=1),  # a knob specterm does not apply: reported, not silently ignored
                line(
                    response_format={
                        "type": "json_schema",
                        "json_schema": {
                            "name": "x",
                            "schema": {
                                "type": "object",
                                "properties": {"order": {"type": "integer"}},
                                "required": ["order"],
                            },
                        },
                    },
                    max_tokens=40,
                ),
            ]
        )
        + "\n"
    )
    out_json = tmp_path / "bench.json"
    assert (
        main(
            [
                "bench",
                "--target",
                smollm2,
                "--requests",
                str(f),
                "--methods",
                "ngram",
                "--k",
                "2",
                "--repeats",
                "1",
                "--json",
                str(out_json),
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    assert f"skipped {f} line 3: frequency_penalty 1 cannot be honoured" in out
    assert "3 requests (1 none, 1 tool, 1 json_schema), 1 skipped" in out
    records = [r for r in json.loads(out_json.read_text())["records"] if r["config"] == "target-only"]
    texts = {r["prompt"]: r["text"] for r in records}
    assert isinstance(json.loads(texts[1])["order_id"], int)  # constrained to lookup_order's arguments
    assert isinstance(json.loads(texts[2])["order"], int)  # constrained to the response_format schema
