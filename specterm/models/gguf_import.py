"""``specterm models import FILE.gguf DIR``: a GGUF model (what llama.cpp and LM Studio users have on
disk) as a directory vLLM loads — dequantised safetensors, ``config.json``, the tokenizer and its
chat template.

The conversion is transformers' own GGUF support (``from_pretrained(..., gguf_file=...)`` with
``GgufConfig(dequantize=True)``: it maps
GGUF metadata to a config, dequantises every tensor with the ``gguf`` package and rebuilds the
tokenizer, chat template included, from ``tokenizer.*`` metadata). specterm adds what that path
lacks for a command-line user:

* **checks before any work**, each one line: not a GGUF file (magic bytes), a truncated file (the
  tensor data ends past the end of the file; ``GGUFReader`` maps the file and would fail late or
  read garbage), an architecture transformers cannot convert (named, with the supported list), a
  target directory that exists and is not empty;
* **nothing half-written**: everything is written to a temporary sibling directory that is renamed
  into place only when complete;
* **progress** per tensor while dequantising, and per stage around it (read, write, tokenizer),
  reported through a callback the CLI draws as a Rich progress bar. transformers' loader iterates
  the tensors through its module-level ``tqdm``; for the duration of the call that name is bound to
  a wrapper that reports to the callback instead of drawing a second bar (``_tensor_progress``; if a
  later transformers renames it, the import still works, only without per-tensor steps);
* ``specterm_import.json`` records the source file, its size and quantisation, and the dtype.

Weights are written in ``--dtype`` (default bfloat16: half the size of float32, and what vLLM's CPU
build runs fastest); quantisation is not preserved — the output is a dense model.
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from specterm.errors import ConfigError

MAGIC = b"GGUF"
DTYPES = ("bfloat16", "float16", "float32")
STAGES = ("reading GGUF metadata", "dequantising tensors", "writing safetensors", "writing tokenizer")

Progress = Callable[[str, int, int], None]
"""``progress(stage, done, total)``: ``total`` = tensors + 3 steps (read, write, tokenizer)."""


class GGUFImportError(ConfigError):
    """One line: why this file cannot be imported (nothing was written)."""


def supported_architectures() -> list[str]:
    from transformers.modeling_gguf_pytorch_utils import GGUF_SUPPORTED_ARCHITECTURES

    return sorted(set(GGUF_SUPPORTED_ARCHITECTURES) - {"general", "tokenizer"})  # metadata sections, not models


def inspect_gguf(path: Path) -> dict:
    """Validate ``path`` and return its metadata summary (architecture, name, tensors, chat template).

    Raises ``GGUFImportError`` for a file that is not GGUF, is truncated or cannot be converted."""
    try:
        with path.open("rb") as f:
            magic = f.read(4)
    except FileNotFoundError:
        raise GGUFImportError(f"no such file: {path}") from None
    except OSError as err:
        raise GGUFImportError(f"cannot read {path}: {err.strerror or err}") from None
    if magic != MAGIC:
        raise GGUFImportError(f"{path} is not a GGUF file (it does not start with the GGUF magic bytes)")
    from gguf import GGUFReader

    try:
        reader = GGUFReader(str(path))
    except Exception as err:  # noqa: BLE001 - a damaged header raises ValueError, IndexError, struct errors...
        raise GGUFImportError(
            f"{path} is a damaged or truncated GGUF file ({type(err).__name__}: "
            f"{str(err).splitlines()[0] if str(err) else 'unreadable header'})"
        ) from None
    size = path.stat().st_size
    end = max((int(t.data_offset) + int(t.n_bytes) for t in reader.tensors), default=0)
    if not reader.tensors or end > size:
        raise GGUFImportError(f"{path} is truncated: its tensors need {end:,} bytes, the file has {size:,}")

    def field(key: str):
        f = reader.fields.get(key)
        return None if f is None else f.contents()

    arch = field("general.architecture")
    supported = supported_architectures()
    if arch not in supported and not (arch or "").startswith(("qwen2moe", "qwen3moe")):
        raise GGUFImportError(
            f"cannot convert architecture {arch!r} (transformers' GGUF support converts: {', '.join(supported)})"
        )
    types = sorted({t.tensor_type.name for t in reader.tensors})
    return {
        "architecture": arch,
        "name": field("general.name"),
        "tensors": len(reader.tensors),
        "tensor_types": types,
        "chat_template": field("tokenizer.chat_template"),
        "bytes": size,
    }


def import_gguf(
    src: str | Path, dest: str | Path, *, dtype: str = "bfloat16", progress: Progress | None = None
) -> dict:
    """Convert ``src`` (a .gguf file) into the model directory ``dest``; returns the import record."""
    with _one_read():
        return _import(src, dest, dtype=dtype, progress=progress)


def _import(src: str | Path, dest: str | Path, *, dtype: str, progress: Progress | None) -> dict:
    src, dest = Path(src).expanduser(), Path(dest).expanduser()
    if dtype not in DTYPES:
        raise GGUFImportError(f"bad --dtype {dtype!r}; choose from {', '.join(DTYPES)}")
    if dest.exists() and (not dest.is_dir() or any(dest.iterdir())):
        raise GGUFImportError(f"{dest} exists and is not an empty directory; choose a new directory")
    report = progress or (lambda _stage, _done, _total: None)
    report(STAGES[0], 0, 1)
    info = inspect_gguf(src)
    n = info["tensors"]
    total = n + 3
    if dest.parent and not dest.parent.exists():
        dest.parent.mkdir(parents=True, exist_ok=True)

    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer, GgufConfig
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()  # "Loading weights" bars: ours is the only one
    tmp = Path(tempfile.mkdtemp(prefix=f".{dest.name}.", dir=dest.parent))
    try:
        report(STAGES[1], 1, total)
        # dequantize=True: a plain dense model (transformers would otherwise keep the GGUF blocks
        # packed, which it cannot save and vLLM cannot load from safetensors).
        with _tensor_progress(lambda i: report(STAGES[1], 1 + i, total)):
            model = AutoModelForCausalLM.from_pretrained(
                str(src.parent),
                gguf_file=src.name,
                dtype=getattr(torch, dtype),
                quantization_config=GgufConfig(dequantize=True),
            )
        report(STAGES[2], n + 1, total)
        model.save_pretrained(str(tmp), safe_serialization=True)
        del model
        report(STAGES[3], n + 2, total)
        tokenizer = AutoTokenizer.from_pretrained(str(src.parent), gguf_file=src.name)
        if info["chat_template"] and not tokenizer.chat_template:
            tokenizer.chat_template = info["chat_template"]
        tokenizer.save_pretrained(str(tmp))
        record = {
            "source": str(src.resolve()),
            "bytes": info["bytes"],
            "architecture": info["architecture"],
            "name": info["name"],
            "tensor_types": info["tensor_types"],
            "dtype": dtype,
            "chat_template": bool(tokenizer.chat_template),
        }
        (tmp / "specterm_import.json").write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
        if dest.exists():
            dest.rmdir()  # empty (checked above)
        _plain_permissions(tmp)  # mkdtemp made it private; a model directory is an ordinary one
        tmp.rename(dest)
    except Exception as err:  # noqa: BLE001 - conversion failures surface as one line, nothing left behind
        msg = str(err).splitlines()[0] if str(err) else type(err).__name__
        raise GGUFImportError(f"cannot convert {src.name}: {msg}") from None
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    report("done", total, total)
    return record


def _plain_permissions(root: Path) -> None:
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(root, 0o777 & ~umask)
    for f in root.iterdir():
        os.chmod(f, 0o666 & ~umask)


@contextmanager
def _one_read() -> Iterator[None]:
    """Read each GGUF file's header once for the whole import. transformers builds a new
    ``GGUFReader`` for the config, the weights and the tokenizer, and each parses every tokenizer
    string in Python (2.7 s each for SmolLM2's 49,152 tokens, here); it also rebuilds gguf's
    tensor-name map for every tensor (10 ms each, ~400 of them), the same map each time. While this
    is active, a file already read gives the same (read-only) reader and an (architecture, layers)
    pair the same map: SmolLM2's import took 27 s → 15 s here, the files written byte-identical.
    Both names are read from ``gguf`` at call time by transformers' loader; where they are not, the
    import works as before, only slower (``tests/test_models_import.py`` pins it: one reader per
    file for three loads)."""
    try:
        import gguf
    except ImportError:
        yield
        return
    original_reader, original_map = gguf.GGUFReader, gguf.get_tensor_name_map
    readers: dict[tuple[str, str], object] = {}

    def reader(path, mode="r"):
        key = (os.path.realpath(path), mode)
        if key not in readers:
            readers[key] = original_reader(path, mode)
        return readers[key]

    gguf.GGUFReader, gguf.get_tensor_name_map = reader, functools.cache(original_map)
    try:
        yield
    finally:
        gguf.GGUFReader, gguf.get_tensor_name_map = original_reader, original_map


@contextmanager
def _tensor_progress(step: Callable[[int], None]) -> Iterator[None]:
    """Bind transformers' GGUF loader's ``tqdm`` to a plain iterator that calls ``step(i)``."""
    try:
        from transformers import modeling_gguf_pytorch_utils as loader
    except ImportError:
        yield
        return
    original = getattr(loader, "tqdm", None)

    def counting(iterable, *args, **kwargs):
        for i, item in enumerate(iterable):
            yield item
            step(i + 1)

    if original is not None:
        loader.tqdm = counting
    try:
        yield
    finally:
        if original is not None:
            loader.tqdm = original
