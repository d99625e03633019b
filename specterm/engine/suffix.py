"""vLLM's suffix decoding (``method="suffix"``) and the one package it needs.

vLLM 0.32.0 imports only ``arctic_inference.suffix_decoding`` (Snowflake's compiled C++ suffix tree)
for this method; nothing else of arctic-inference is used. It is an opt-in extra (``specterm[suffix]``,
built from source: README "Suffix decoding"), so its absence is one line, never a traceback.
"""

from __future__ import annotations

SUFFIX_HINT = (
    "method suffix needs the arctic-inference package (a C++ suffix tree built from source): "
    "pip install 'specterm[suffix]' (or: pip install arctic-inference==0.3.0 --no-deps)"
)


def suffix_decoding_problem() -> str | None:
    """Why vLLM's ``method="suffix"`` cannot run here, or ``None``. vLLM imports only
    ``arctic_inference.suffix_decoding`` (its compiled ``_C`` tree), so that is what is tried."""
    try:
        import arctic_inference.suffix_decoding  # noqa: F401
    except ImportError as err:
        if getattr(err, "name", None) == "arctic_inference":  # not installed at all
            return SUFFIX_HINT
        first = (str(err).strip().splitlines() or [type(err).__name__])[0]
        return f"{SUFFIX_HINT}; the installed one does not import: {first}"
    return None


def reset_suffix_drafter(worker) -> None:
    """Runs in each worker (``collective_rpc``): replace the suffix drafter's cache with an empty one.
    vLLM has no public call for it (its prefix-cache reset leaves the drafter alone), so the cache is
    rebuilt as vLLM builds it, with the same depth and request limits."""
    from arctic_inference.suffix_decoding import SuffixDecodingCache

    from specterm.engine.vllm_internals import replace_suffix_cache

    replace_suffix_cache(
        worker,
        lambda old: SuffixDecodingCache(max_tree_depth=old.max_tree_depth, max_cached_requests=old.max_cached_requests),
    )
