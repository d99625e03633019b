"""User tools as plugins: a ``tools.py`` beside ``agent.toml``, installed ``specterm.tools`` entry
points (a real dist-info on a temporary ``sys.path`` entry, read by the real ``importlib.metadata``),
``specterm agents new/list``, loading errors, raising and hanging tools, and — on the REAL vLLM engine
with the tiny pair — a scaffolded agent's turn calling its own tool and ``retrieve_after``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from specterm.agent import AgentRunner, load_agent
from specterm.agent.prompt import build_chat, call_schema
from specterm.agent.scaffold import scaffold
from specterm.agent.tools import ToolBox
from specterm.cli import main
from specterm.errors import ConfigError
from specterm.events import RequestStarted, Retrieval, ToolCall, ToolResult

TOOL = """\
system = "You help."
[[tools]]
name = "probe"
handler = "{handler}"
{extra}
"""

TOOLS_PY = '''\
import asyncio
import sys
import time
from typing import Annotated

from pydantic import Field


def shout(text: Annotated[str, Field(max_length=20)], times: int = 1) -> str:
    """Upper-case a text.

    Everything after the first paragraph stays out of the description."""
    return " ".join([text.upper()] * times)


def table(n: int) -> dict:
    return {"n": n, "squares": [i * i for i in range(n)]}


def boom(text: str) -> str:
    raise ValueError(f"no {text} here")


def bye() -> str:
    sys.exit(3)


def slow() -> str:
    time.sleep(3)
    return "too late"


async def later(text: str) -> str:
    await asyncio.sleep(0)
    return text[::-1]


def needs_callback(cb: "callable") -> str:
    return "never"
'''


def make_agent(root: Path, name: str, handler: str, extra: str = "", tools_py: str | None = TOOLS_PY) -> Path:
    folder = root / name
    folder.mkdir(parents=True)
    (folder / "agent.toml").write_text(TOOL.format(handler=handler, extra=extra))
    if tools_py is not None:
        (folder / "tools.py").write_text(tools_py)
    return folder


def test_a_function_beside_agent_toml_is_a_tool_with_its_signature_as_schema(tmp_path):
    agent = load_agent(make_agent(tmp_path, "shouter", "tools:shout"))
    tool = agent.tools[0]
    assert tool.description == "Upper-case a text."
    assert tool.parameters["required"] == ["text"] and tool.parameters["additionalProperties"] is False
    assert tool.parameters["properties"]["text"]["maxLength"] == 20
    # The call is grammar-constrained like a built-in: the tool's branch carries this schema.
    branch = call_schema(agent)["anyOf"][0]
    assert branch["properties"]["arguments"] == tool.parameters
    out = ToolBox(agent).call("probe", {"text": "hi", "times": 2})
    assert out.ok and out.content == "HI HI"
    bad = ToolBox(agent).call("probe", {"text": "x" * 21})  # checked against the schema first
    assert not bad.ok and "bad arguments for probe at text" in bad.error


def test_parameters_and_description_in_agent_toml_win_over_the_function(tmp_path):
    extra = (
        'description = "Shout it."\n[tools.parameters]\ntype = "object"\nrequired = ["text"]\n'
        'additionalProperties = false\nproperties.text = { type = "string", enum = ["a", "b"] }\n'
    )
    tool = load_agent(make_agent(tmp_path, "shouter", "tools:shout", extra)).tools[0]
    assert tool.description == "Shout it." and tool.parameters["properties"]["text"] == {
        "type": "string",
        "enum": ["a", "b"],
    }


def test_results_dicts_are_json_and_async_tools_run(tmp_path):
    folder = make_agent(tmp_path, "t1", "tools:table")
    assert json.loads(ToolBox(load_agent(folder)).call("probe", {"n": 3}).content) == {"n": 3, "squares": [0, 1, 4]}
    folder = make_agent(tmp_path, "t2", "tools:later")
    assert ToolBox(load_agent(folder)).call("probe", {"text": "abc"}).content == "cba"


def test_two_agents_with_a_tools_py_each_do_not_collide(tmp_path):
    a = load_agent(make_agent(tmp_path, "a", "tools:shout"))
    b = load_agent(make_agent(tmp_path, "b", "tools:shout", tools_py=TOOLS_PY.replace("text.upper()", "text.lower()")))
    assert ToolBox(a).call("probe", {"text": "Hi"}).content == "HI"
    assert ToolBox(b).call("probe", {"text": "Hi"}).content == "hi"


def test_two_tools_from_one_file_share_one_module_run_once(tmp_path):
    """A module's top level (opening a client, counting calls) runs once per agent folder, however
    many of its functions are tools."""
    folder = tmp_path / "two"
    folder.mkdir()
    (folder / "agent.toml").write_text(
        'system = "s"\n[[tools]]\nname = "one"\nhandler = "tools:one"\n[[tools]]\nname = "two"\nhandler = "tools:two"\n'
    )
    (folder / "tools.py").write_text(
        "RUNS = []\nRUNS.append(1)\n\ndef one() -> str:\n    return str(len(RUNS))\n\n"
        "def two() -> str:\n    RUNS.append(2)\n    return str(len(RUNS))\n"
    )
    box = ToolBox(load_agent(folder))
    assert box.call("two", {}).content == "2"
    assert box.call("one", {}).content == "2"  # the same RUNS list: the file ran once


@pytest.mark.parametrize(
    "handler, error",
    [
        ("tools:boom", "tool failed: ValueError: no sky here"),
        ("tools:bye", "tool failed: SystemExit: 3"),
    ],
)
def test_a_raising_tool_is_an_error_result_the_model_sees(tmp_path, handler, error):
    agent = load_agent(make_agent(tmp_path, "r", handler))
    out = ToolBox(agent).call("probe", {"text": "sky"} if handler.endswith("boom") else {})
    assert not out.ok and out.error == error
    assert out.for_prompt(agent.result_chars) == f"error: {error}"


def test_a_hanging_tool_times_out_into_an_error_result(tmp_path):
    agent = load_agent(make_agent(tmp_path, "h", "tools:slow", "timeout_s = 0.2"))
    out = ToolBox(agent).call("probe", {})
    assert not out.ok and out.error == "tool timed out after 0.2s"


@pytest.mark.parametrize(
    "handler, tools_py, field, words",
    [
        ("tools:lookup", TOOLS_PY, "tools[0].handler", "module tools.py has no function 'lookup'"),
        ("helpers:shout", TOOLS_PY, "tools[0].handler", "no file helpers.py beside agent.toml"),
        ("tools:shout", "def shout(:\n", "tools[0].handler", "cannot import tools.py: SyntaxError:"),
        (
            "tools:shout",
            "import no_such_module_here\n",
            "tools[0].handler",
            "cannot import tools.py: ModuleNotFoundError: No module named 'no_such_module_here'",
        ),
        ("tools:CONSTANT", "CONSTANT = 3\n", "tools[0].handler", "tools.CONSTANT is not a function (it is a int)"),
        ("a:b:c", TOOLS_PY, "tools[0].handler", "neither a built-in, MODULE:FUNCTION"),
        (
            "tools:needs_callback",
            TOOLS_PY,
            "tools[0].parameters",
            "cannot derive a JSON Schema from tools:needs_callback",
        ),
        ("tools:shout", TOOLS_PY, "tools[0].retrieve_after", "the agent retrieves nothing"),
    ],
)
def test_loading_errors_are_one_line_naming_file_and_field(tmp_path, handler, tools_py, field, words):
    extra = "retrieve_after = true" if field.endswith("retrieve_after") else ""
    folder = make_agent(tmp_path, "broken", handler, extra, tools_py)
    with pytest.raises(ConfigError) as err:
        load_agent(folder)
    message = str(err.value)
    assert "\n" not in message and message.startswith(f"{folder / 'agent.toml'}: {field}: "), message
    assert words in message, message


# -- installed packages: the specterm.tools entry point group ----------------------------------

PLUGIN = '''\
from pydantic import BaseModel, ConfigDict, Field


class City(BaseModel):
    model_config = ConfigDict(extra="forbid")
    city: str = Field(max_length=30)


def weather(args: City) -> dict:
    """Today's weather in a city."""
    return {"city": args.city, "sky": "clear"}
'''


@pytest.fixture
def installed(tmp_path, monkeypatch):
    """A package ``specterm-probe-tools`` "installed" the way pip leaves one: its module and a
    ``*.dist-info`` with ``entry_points.txt``, on a temporary ``sys.path`` entry."""
    site = tmp_path / "site"
    (site / "specterm_probe_tools").mkdir(parents=True)
    (site / "specterm_probe_tools" / "__init__.py").write_text(PLUGIN)
    info = site / "specterm_probe_tools-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: specterm-probe-tools\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(
        "[specterm.tools]\nprobe_weather = specterm_probe_tools:weather\nprobe_broken = specterm_probe_tools:missing\n"
    )
    monkeypatch.syspath_prepend(str(site))
    return site


def test_an_entry_point_tool_brings_its_pydantic_model_as_schema(tmp_path, installed):
    agent = load_agent(make_agent(tmp_path, "w", "entry:probe_weather", tools_py=None))
    tool = agent.tools[0]
    assert tool.description == "Today's weather in a city."
    assert tool.parameters["properties"]["city"]["maxLength"] == 30 and tool.parameters["additionalProperties"] is False
    out = ToolBox(agent).call("probe", {"city": "Oslo"})
    assert out.ok and json.loads(out.content) == {"city": "Oslo", "sky": "clear"}


@pytest.mark.parametrize(
    "handler, words",
    [
        (
            "entry:probe_broken",
            "entry point 'probe_broken' (specterm_probe_tools:missing) failed to load: AttributeError",
        ),
        ("entry:probe_nope", "no specterm.tools entry point named 'probe_nope' (known: "),
    ],
)
def test_a_missing_or_broken_entry_point_is_a_loading_error(tmp_path, installed, handler, words):
    folder = make_agent(tmp_path, "w", handler, tools_py=None)
    with pytest.raises(ConfigError, match=r"agent.toml: tools\[0\].handler: ") as err:
        load_agent(folder)
    assert words in str(err.value)
    if handler.endswith("nope"):  # the message names the tools that are installed
        assert "probe_weather" in str(err.value)


def test_agents_list_shows_shipped_and_folder_agents_and_installed_tools(tmp_path, installed, monkeypatch, capsys):
    make_agent(tmp_path / "mine", "shouter", "tools:shout")
    make_agent(tmp_path / "mine", "broken", "tools:lookup")
    monkeypatch.setenv("SPECTERM_AGENTS_DIR", str(tmp_path / "mine"))
    assert main(["agents", "list"]) == 0
    out = capsys.readouterr().out
    assert "shouter" in out and "probe (tools:shout)" in out and "sql_analyst" in out and "shipped" in out
    assert "module tools.py has no function 'lookup'" in out  # a broken agent is listed with its error
    line = next(li for li in out.splitlines() if "probe_weather" in li)
    assert "specterm-probe-tools 0.1" in line and "specterm_probe_tools:weather" in line


# -- specterm agents new -----------------------------------------------------------------------


def test_agents_new_scaffolds_a_loadable_folder_and_refuses_to_overwrite(tmp_path, capsys):
    assert main(["agents", "new", "helper", "--dir", str(tmp_path)]) == 0
    folder = tmp_path / "helper"
    assert {p.name for p in folder.iterdir()} == {"agent.toml", "tools.py", "README.md"}
    agent = load_agent(folder)
    assert agent.name == "helper" and agent.tools[0].handler == "tools:word_stats"
    assert ToolBox(agent).call("word_stats", {"text": "the quick brown fox"}).content == "4 words, 19 characters"
    before = (folder / "tools.py").read_text()
    (folder / "tools.py").write_text(before + "# mine\n")
    capsys.readouterr()
    assert main(["agents", "new", "helper", "--dir", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "already exists" in err[0]
    assert (folder / "tools.py").read_text() == before + "# mine\n"  # nothing overwritten
    assert main(["agents", "new", "Bad-Name", "--dir", str(tmp_path)]) == 2


# -- the real engine ----------------------------------------------------------------------------

QUESTION = "How many words are in 'the quick brown fox'?"
DOC = """# Measuring text

Asked how many words are in a phrase or a quote, call word_stats with that phrase.

A result reads "N words, M characters": the characters include spaces; report the words first.
"""


def small(folder: Path, extra: str = "") -> Path:
    """The scaffold with tight limits (two generations, short answer) so the pair's run is short;
    the prompt the model sees is the scaffold's own. The scaffold's ``tool_first`` makes the first
    generation the call of its one tool whatever tokens the pair picks; the text it measures is cut
    to 20 characters so that call always fits ``max_tokens`` (16 tokens of JSON around it, 56 if
    every character were a two-character escape): a call cut short would be no call at all."""
    toml = folder / "agent.toml"
    text = toml.read_text().replace("max_steps = 3", "max_steps = 2").replace("max_tokens = 128", "max_tokens = 64")
    toml.write_text(text.replace("answer_chars = 120", "answer_chars = 16") + extra)
    tools = folder / "tools.py"
    tools.write_text(tools.read_text().replace("max_length=200", "max_length=20"))
    return folder


def run(agent, engine):
    events = []
    result = AgentRunner(agent, engine).run(QUESTION, events.append)
    return result, events


@pytest.fixture(scope="module")
def engine():
    """The embedded pair (committed weights, not trained for the scaffold). Which tokens it picks
    still differs by CPU (float kernels differ by instruction set), so nothing below depends on
    them: the first generation is the call because of ``tool_first`` (``small``)."""
    from specterm.engine import EngineConfig, load_engine
    from specterm.paths import embedded_pair_dir

    pair = embedded_pair_dir()
    with load_engine(EngineConfig(target=str(pair / "target"), draft=str(pair / "draft"), method="draft_model")) as eng:
        yield eng


@pytest.mark.engine
def test_a_scaffolded_agent_calls_its_own_tool_in_a_real_turn(tmp_path, engine):
    agent = load_agent(small(scaffold("scaffolded", tmp_path)))
    result, events = run(agent, engine)
    calls = [e for e in events if isinstance(e, ToolCall)]
    results = [e for e in events if isinstance(e, ToolResult)]
    assert calls and calls[0].name == "word_stats" and len(results) == len(calls)
    text = calls[0].arguments["text"]
    assert results[0].ok and results[0].content == f"{len(text.split())} words, {len(text)} characters"
    assert result.generations == 2  # the model went on after the result


@pytest.mark.engine
def test_the_embedded_pair_says_once_that_it_never_learned_a_new_agent(tmp_path, engine):
    from specterm.events import Error
    from specterm.session.live import agent_runner

    runner = agent_runner(load_agent(small(scaffold("scaffolded", tmp_path))), engine)
    first, second = [], []
    runner(QUESTION, first.append, None)
    runner(QUESTION, second.append, None)
    notices = [e.message for e in first if isinstance(e, Error) and "trained only for the shipped agents" in e.message]
    assert len(notices) == 1 and notices[0].startswith("the embedded pair ") and "with scaffolded" in notices[0]
    assert not any(isinstance(e, Error) and "trained only" in e.message for e in second)


@pytest.mark.engine
def test_a_raising_user_tool_is_an_error_result_and_the_turn_goes_on(tmp_path, engine):
    folder = small(scaffold("raising", tmp_path))
    tools = folder / "tools.py"
    tools.write_text(tools.read_text().replace('    return f"', '    raise ValueError("cannot count")\n    return f"'))
    result, events = run(load_agent(folder), engine)
    results = [e for e in events if isinstance(e, ToolResult)]
    assert results and not results[0].ok and results[0].error == "tool failed: ValueError: cannot count"
    assert result.generations == 2 and not any(e.type == "error" and "crash" in e.message for e in events)


@pytest.mark.engine
def test_retrieve_after_runs_retrieval_again_with_the_tool_result(tmp_path, engine):
    folder = scaffold("retriever", tmp_path)
    (folder / "docs").mkdir()
    (folder / "docs" / "measure.md").write_text(DOC)
    text = (folder / "agent.toml").read_text().replace("# retrieve_after = true", "retrieve_after = true")
    (folder / "agent.toml").write_text(text)
    agent = load_agent(small(folder, "\n[retrieval]\ntop_k = 1\n"))
    assert agent.tools[0].retrieve_after
    result, events = run(agent, engine)
    retrievals = [e for e in events if isinstance(e, Retrieval)]
    results = [e for e in events if isinstance(e, ToolResult)]
    assert results and results[0].ok
    assert [r.query for r in retrievals] == [QUESTION, results[0].content]
    assert retrievals[1].step == results[0].step + 1
    # The question finds the "call word_stats" paragraph; the tool's result finds the other one.
    assert [p.text[:8] for p in retrievals[0].passages] == ["Asked ho"]
    assert [p.text[:8] for p in retrievals[1].passages] == ["A result"]
    # ...and it is in the next generation's prompt: its token count is that of the conversation
    # with both passages in the context.
    call = next(e for e in events if isinstance(e, ToolCall))
    history = [("user", QUESTION), ("call", call.raw), ("result", results[0].content)]
    chat = build_chat(
        agent, history, retrievals[0].passages + retrievals[1].passages, key=AgentRunner(agent, engine).call_key
    )
    starts = [e for e in events if isinstance(e, RequestStarted)]
    assert len(starts) == 2 and starts[1].prompt_tokens == len(engine.renderer.ids(chat))
