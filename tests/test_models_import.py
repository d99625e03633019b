"""``specterm models import``: a GGUF file becomes a directory vLLM loads, and every bad input is one
line with nothing written. The bad files are real GGUF written by the ``gguf`` package (then cut
short, or naming an architecture that cannot be converted)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from specterm.cli import main

pytestmark = pytest.mark.engine  # needs gguf/transformers (engine extra)


def _gguf(path: Path, arch: str = "llama") -> Path:
    from gguf import GGUFWriter

    w = GGUFWriter(str(path), arch)
    w.add_name("tiny-test")
    w.add_tensor("token_embd.weight", np.ones((64, 16), dtype=np.float32))
    w.add_tensor("output_norm.weight", np.ones((16,), dtype=np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


def _import(capsys, *args: str) -> tuple[int, list[str]]:
    rc = main(["models", "import", *args])
    return rc, [ln for ln in capsys.readouterr().err.splitlines() if ln.strip()]


def test_a_file_that_is_not_gguf(tmp_path, capsys):
    src = tmp_path / "model.gguf"
    src.write_text("this is not a model\n")
    rc, err = _import(capsys, str(src), str(tmp_path / "out"))
    assert rc != 0 and len(err) == 1 and "not a GGUF file" in err[0]
    assert not (tmp_path / "out").exists()


def test_a_truncated_gguf(tmp_path, capsys):
    src = _gguf(tmp_path / "model.gguf")
    data = src.read_bytes()
    src.write_bytes(data[: len(data) - 1000])
    rc, err = _import(capsys, str(src), str(tmp_path / "out"))
    assert rc != 0 and len(err) == 1 and "truncated" in err[0]
    assert not (tmp_path / "out").exists() and [p.name for p in tmp_path.iterdir()] == ["model.gguf"]


def test_an_architecture_that_cannot_be_converted(tmp_path, capsys):
    src = _gguf(tmp_path / "model.gguf", arch="rwkv6")
    rc, err = _import(capsys, str(src), str(tmp_path / "out"))
    assert rc != 0 and len(err) == 1 and "cannot convert architecture 'rwkv6'" in err[0] and "llama" in err[0]
    assert not (tmp_path / "out").exists()


def test_a_target_directory_that_is_not_empty(tmp_path, capsys):
    src = _gguf(tmp_path / "model.gguf")
    out = tmp_path / "out"
    out.mkdir()
    (out / "keep.txt").write_text("mine")
    rc, err = _import(capsys, str(src), str(out))
    assert rc != 0 and len(err) == 1 and "not an empty directory" in err[0]
    assert [p.name for p in out.iterdir()] == ["keep.txt"] and (out / "keep.txt").read_text() == "mine"


def test_smollm2_imports_with_weights_tokenizer_and_chat_template(smollm2):
    d = Path(smollm2)
    record = json.loads((d / "specterm_import.json").read_text())
    assert record["architecture"] == "llama" and record["chat_template"] and "Q4_1" in record["tensor_types"]
    from transformers import AutoConfig, AutoTokenizer

    assert AutoConfig.from_pretrained(smollm2).vocab_size == 49152
    tok = AutoTokenizer.from_pretrained(smollm2)
    text = tok.apply_chat_template([{"role": "user", "content": "hi"}], tokenize=False, add_generation_prompt=True)
    assert text.endswith("<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n")
    assert sorted(p.name for p in d.iterdir() if p.name.endswith(".safetensors")) == ["model.safetensors"]


def test_an_import_reads_each_gguf_header_once_through_transformers_loader(tmp_path, monkeypatch):
    """Pins what ``gguf_import._one_read`` relies on (transformers 5.x, gguf 0.19): transformers'
    GGUF loader takes ``GGUFReader`` from ``gguf`` when it is called (``get_tensor_name_map`` the
    same way, a line above it in transformers). Three loads of one real GGUF file inside one import build one reader; afterwards the names are
    gguf's own again. If transformers binds them at import time instead, this fails (and imports are
    only slower, not wrong)."""
    import gguf
    from transformers.modeling_gguf_pytorch_utils import load_gguf_checkpoint

    from specterm.models.gguf_import import _one_read

    made: list[str] = []

    class Counting(gguf.GGUFReader):
        def __init__(self, path, *args, **kwargs):
            made.append(str(path))
            super().__init__(path, *args, **kwargs)

    monkeypatch.setattr(gguf, "GGUFReader", Counting)
    name_map = gguf.get_tensor_name_map
    src = _gguf(tmp_path / "model.gguf")
    with _one_read():
        for _ in range(3):
            assert "config" in load_gguf_checkpoint(str(src), return_tensors=False)
    assert made == [str(src)]
    assert gguf.GGUFReader is Counting and gguf.get_tensor_name_map is name_map
    assert load_gguf_checkpoint(str(src), return_tensors=False)
    assert len(made) == 2  # outside an import: a reader per load, as transformers does
