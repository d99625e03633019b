"""How many bytes of weights a model streams per forward pass, from its safetensors headers.

Decoding is memory-bound: every forward pass reads every weight once, whatever the number of
positions it computes. So a verification pass of the target costs its weight bytes, and a draft
pass the draft's; speculation wins by emitting several tokens per target pass (the bandwidth panel,
``stats.WeightTraffic``). The count comes from the safetensors headers alone (an 8-byte length and
a JSON table of dtypes and shapes, per the format's spec), so nothing is loaded; the bytes are the
element count at the dtype the engine runs (``--dtype``; the stored dtype for ``auto``). KV-cache
and activation traffic are not counted: this is the weights' share, the part speculation divides.
"""

from __future__ import annotations

import json
import struct
from math import prod
from pathlib import Path

ELEMENT_BYTES = {
    "F64": 8,
    "I64": 8,
    "U64": 8,
    "F32": 4,
    "I32": 4,
    "U32": 4,
    "F16": 2,
    "BF16": 2,
    "I16": 2,
    "U16": 2,
    "F8_E4M3": 1,
    "F8_E5M2": 1,
    "I8": 1,
    "U8": 1,
    "BOOL": 1,
}
"""Bytes per element of each safetensors dtype."""
RUN_DTYPE_BYTES = {"float32": 4, "float": 4, "bfloat16": 2, "float16": 2, "half": 2}
"""Bytes per parameter at each engine ``dtype`` (``auto`` or None: as stored)."""


def _tensors(path: Path) -> list[tuple[str, int]]:
    """(dtype, element count) of every tensor in one safetensors file."""
    with path.open("rb") as f:
        (size,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(size))
    return [(t["dtype"], prod(t["shape"])) for name, t in header.items() if name != "__metadata__"]


def weight_bytes(model: str | Path | None, dtype: str | None = None) -> int | None:
    """Bytes of weights one forward pass of ``model`` (a local directory) reads, at ``dtype``; None
    when that cannot be told here (a hub id, no safetensors, an unreadable header)."""
    if model is None:
        return None
    root = Path(model)
    files = sorted(root.glob("*.safetensors")) if root.is_dir() else []
    if not files:
        return None
    per_param = RUN_DTYPE_BYTES.get((dtype or "auto").lower())
    try:
        tensors = [t for f in files for t in _tensors(f)]
    except (OSError, ValueError, KeyError, TypeError, struct.error):
        return None
    if per_param is None:  # auto: as stored
        if any(d not in ELEMENT_BYTES for d, _ in tensors):
            return None
        return sum(ELEMENT_BYTES[d] * n for d, n in tensors)
    return per_param * sum(n for _, n in tensors)
