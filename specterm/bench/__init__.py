"""``specterm bench``: speculative decoding vs target-only, side by side, against the theory.

Modules: ``workloads`` (prompt sets), ``runner`` (interleaved engine runs → request records),
``results`` (medians, spreads, draft cost ratio c, theory), ``theory`` (Leviathan et al.'s
speed-up model and how α comes from measured stats), ``report`` (table, terminal plot, JSON, SVG),
``sanity`` (is this backend's speculative decoding correct?). Terms are defined in each module's
docstring; metric definitions follow ``specterm.stats`` (vLLM's).
"""
