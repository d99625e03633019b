"""What a server's Prometheus ``/metrics`` says of speculation: vLLM's spec-decode counters, for the
end-of-attach reconciliation (``verdicts.vllm_totals`` is our side of it)."""

from __future__ import annotations


def spec_counters_by_engine(url: str) -> dict[int, dict[str, int]]:
    """vLLM's spec-decode counters from a server's ``/metrics``, parsed with prometheus_client's own
    parser, per ``engine`` label: vLLM labels each data-parallel rank's counters ``engine="RANK"``
    (0 on a one-rank server); other labels (the model name) are summed."""
    import urllib.request

    from prometheus_client.parser import text_string_to_metric_families

    from specterm.engine.verdicts import SPEC_METRICS

    with urllib.request.urlopen(url, timeout=5) as resp:  # a URL the user gave
        text = resp.read().decode()
    out: dict[int, dict[str, int]] = {}
    for family in text_string_to_metric_families(text):
        key = SPEC_METRICS.get(family.name)
        if key is None:
            continue
        for sample in family.samples:
            if sample.name.endswith("_total"):
                engine = int(sample.labels.get("engine", 0))
                counters = out.setdefault(engine, dict.fromkeys(SPEC_METRICS.values(), 0))
                counters[key] += int(sample.value)
    return out


def scrape_spec_counters(url: str) -> dict[str, int]:
    """``spec_counters_by_engine`` summed over every engine: the whole server."""
    from specterm.engine.verdicts import SPEC_METRICS

    out = dict.fromkeys(SPEC_METRICS.values(), 0)
    for counters in spec_counters_by_engine(url).values():
        for key, value in counters.items():
            out[key] += value
    return out
