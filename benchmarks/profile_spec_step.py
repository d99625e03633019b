"""Where does a speculative step's time go on this machine? cProfile over the same requests on a
target-only engine and a speculative one (tiny pair, draft_model k=4 and ngram k=4 by default).

Usage: ``python benchmarks/profile_spec_step.py [--k 4] [--max-tokens 48] [--top 0]``

Prints, per engine, the cumulative seconds (and share of the time spent in ``generate``) of the
parts of a step: scheduling, the target forward pass, drafting (``propose_draft_token_ids``), the
rejection sampler, vLLM's output processing (detokenisation), and specterm's own hook and verdict
assembly. cProfile adds per-call overhead to Python-heavy parts, so read shares, not absolute ms.
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import sys

PARTS = {  # label → (file fragment, function name)
    "engine step (all)": ("v1/engine/llm_engine.py", "step"),
    "scheduler.schedule": ("v1/core/sched/scheduler.py", "schedule"),
    "model runner execute_model": ("v1/worker/gpu_model_runner.py", "execute_model"),
    "  target forward (_model_forward)": ("v1/worker/gpu_model_runner.py", "_model_forward"),
    "  sample_tokens": ("v1/worker/gpu_model_runner.py", "sample_tokens"),
    "  drafting (propose_draft_token_ids)": ("v1/worker/gpu_model_runner.py", "propose_draft_token_ids"),
    "  rejection sampler": ("v1/sample/rejection_sampler.py", "forward"),
    "update_from_output (incl. specterm hook)": ("v1/core/sched/scheduler.py", "update_from_output"),
    "output processing / detokenise": ("v1/engine/output_processor.py", "process_outputs"),
    "specterm verdict assembly": ("specterm/engine/verdicts.py", "add"),
}


def cumulative(stats: pstats.Stats, fragment: str, name: str) -> float:
    return sum(v[3] for (file, _, func), v in stats.stats.items() if func == name and fragment in file)


def profile(config, prompts, params, top: int) -> None:
    from specterm.engine import load_engine

    with load_engine(config) as engine:
        engine.generate(prompts[0], params.model_copy(update={"max_tokens": 4}), lambda e: None)  # warm-up
        prof = cProfile.Profile()
        steps = []
        prof.enable()
        for p in prompts:
            engine.generate(p, params, lambda e: steps.append(e) if e.type == "spec_step" else None)
        prof.disable()
    stats = pstats.Stats(prof)
    total = cumulative(stats, "specterm/engine/vllm_engine.py", "generate")
    tokens = sum(len(s.tokens) for s in steps)
    label = "target-only" if config.method is None else f"{config.method} k={config.num_speculative_tokens}"
    print(
        f"\n{label}: {len(steps)} steps, {tokens} tokens, generate {total:.2f} s "
        f"({total / len(steps) * 1e3:.1f} ms/step, {tokens / total:.0f} tok/s under the profiler)"
    )
    for name, (frag, func) in PARTS.items():
        secs = cumulative(stats, frag, func)
        if secs:
            print(f"  {name:<42} {secs:7.3f} s  {secs / total:6.1%}  {secs / len(steps) * 1e3:6.2f} ms/step")
    if top:
        stats.sort_stats("cumulative").print_stats(top)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--k", type=int, default=4)
    ap.add_argument("--max-tokens", type=int, default=48)
    ap.add_argument("--top", type=int, default=0, help="also print the top N functions by cumulative time")
    args = ap.parse_args()
    from specterm.bench.workloads import builtin_prompts
    from specterm.engine import EngineConfig, GenerationParams
    from specterm.models.defaults import ensure_small_models

    target, draft = (str(p) for p in ensure_small_models(log=lambda m: print(m, file=sys.stderr)))
    prompts, params = builtin_prompts("toolcalls"), GenerationParams(max_tokens=args.max_tokens)
    for method in (None, "draft_model", "ngram"):
        profile(
            EngineConfig(target=target, draft=draft, method=method, num_speculative_tokens=args.k),
            prompts,
            params,
            args.top,
        )
    return 0


if __name__ == "__main__":  # vLLM spawns processes: the guard is required
    sys.exit(main())
