"""Engines: the ``SpecEngine`` interface and its vLLM implementation.

``load_engine`` is the one factory the CLI, the UI and the benchmarks use. Importing this package
does not import vLLM; only building a vLLM engine does.
"""

from __future__ import annotations

from specterm.engine.base import Capabilities, EngineConfig, GenerationParams, SessionClock, SpecEngine

__all__ = ["Capabilities", "EngineConfig", "GenerationParams", "SessionClock", "SpecEngine", "load_engine"]


def load_engine(config: EngineConfig, *, clock: SessionClock | None = None) -> SpecEngine:
    """Build the engine for ``config`` (raises ``SpectermError`` subclasses with one-line reasons)."""
    from specterm.engine.vllm_engine import VllmSpecEngine

    return VllmSpecEngine(config, clock=clock)
