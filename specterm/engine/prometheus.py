"""Two vLLM engines in one process, each reconciling against its own Prometheus counters.

``LLMEngine.get_metrics`` reads prometheus_client's global registry, and each new engine unregisters
the previous one's ``vllm:`` collectors (``unregister_vllm_metrics``). With two engines alive
(``specterm compare``, ``bench`` blocks) the first would reconcile its verdicts against zeros, so each
engine keeps its own collectors (``own_vllm_collectors`` right after it is built) and puts them back
before a request (``activate_collectors``). prometheus_client has no public list of registered
collectors: ``vllm_internals.registered_collectors`` reads its private map.
"""

from __future__ import annotations

from specterm.engine.vllm_internals import collector_name, registered_collectors


def _registered_vllm() -> list:
    return [c for c in registered_collectors() if collector_name(c).startswith("vllm:")]


def own_vllm_collectors() -> list:
    """The ``vllm:`` collectors registered now: call it right after building an engine."""
    return _registered_vllm()


def activate_collectors(collectors: list) -> None:
    """Make ``collectors`` the registered ``vllm:`` ones (best effort: a failure shows up as a
    reconciliation warning, never as a failed request)."""
    from prometheus_client import REGISTRY

    current = _registered_vllm()
    if not collectors or current == collectors:
        return
    try:
        for c in current:
            REGISTRY.unregister(c)
        for c in collectors:
            REGISTRY.register(c)
    except (KeyError, ValueError):  # a collector registered twice or gone: reconciliation then says so
        pass
