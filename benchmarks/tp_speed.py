"""TP = 2 against TP = 1 in one run: engine start, output tokens per second, greedy identity and
reconciliation, on the same prompts (default: the embedded pair, speculative, k = 4).

    PYTHONPATH=$PWD python benchmarks/tp_speed.py [--target DIR --draft DIR] [--tp 1,2] [--rounds 3]

Prints one line per TP size and the ratio to the first. Not a test (timings are not asserted
anywhere); ``tests/test_engine_parallel.py`` is the correctness check.
"""

from __future__ import annotations

import argparse
import time

from specterm.bench.workloads import ENGINE_CHECK, RAW
from specterm.engine import EngineConfig, GenerationParams, load_engine
from specterm.events import EngineCounters, SpecStep
from specterm.paths import embedded_pair_dir

PROMPTS = [*ENGINE_CHECK, RAW["toolcalls"][4]]


def measure(config: EngineConfig, rounds: int, max_tokens: int) -> dict:
    t0 = time.perf_counter()
    with load_engine(config) as engine:
        start_s = time.perf_counter() - t0
        params = GenerationParams(max_tokens=max_tokens)
        engine.generate(PROMPTS[0], params, lambda e: None)  # warm-up, not counted
        tokens, wall, ids, matched = 0, 0.0, [], True
        for r in range(rounds):
            for prompt in PROMPTS:
                events: list = []
                engine.reset_prefix_cache()
                finished = engine.generate(prompt, params, events.append)
                tokens += finished.output_tokens
                wall += finished.wall_s
                matched &= all(e.matched for e in events if isinstance(e, EngineCounters))
                if r == 0:
                    ids.append([t.id for e in events if isinstance(e, SpecStep) for t in e.tokens])
    return {"start_s": start_s, "tok_s": tokens / wall, "tokens": tokens, "ids": ids, "matched": matched}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--target", default=str(embedded_pair_dir() / "target"))
    p.add_argument("--draft", default=str(embedded_pair_dir() / "draft"))
    p.add_argument("--tp", default="1,2", help="comma list of tensor-parallel sizes (default 1,2)")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--max-tokens", type=int, default=32)
    p.add_argument("--no-spec", action="store_true")
    args = p.parse_args()
    results = {}
    for tp in (int(x) for x in args.tp.split(",")):
        config = EngineConfig(
            target=args.target,
            draft=args.draft,
            tensor_parallel_size=tp,
            method=None if args.no_spec else "draft_model",
        )
        results[tp] = m = measure(config, args.rounds, args.max_tokens)
        base = results[next(iter(results))]
        print(
            f"TP={tp}: start {m['start_s']:.1f} s, {m['tok_s']:.1f} tok/s over {m['tokens']} tokens "
            f"(x{m['tok_s'] / base['tok_s']:.2f} of TP={next(iter(results))}), "
            f"verdicts reconciled: {m['matched']}, output identical: {m['ids'] == base['ids']}",
            flush=True,
        )


if __name__ == "__main__":
    main()
