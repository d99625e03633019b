"""What publishing verdicts costs a served model: output throughput of ``vllm serve`` with specterm's
publishing scheduler ÷ the same server with vLLM's default scheduler, at each concurrency, with nobody
attached and with ``specterm attach`` reading.

Usage (defaults: SmolLM2-135M-Instruct as ``specterm models fetch smollm2`` builds it, n-gram k = 4)::

    python benchmarks/attach_overhead.py [--model PATH] [--concurrency 1,8] [--rounds 3] [--max-tokens 64]

Both servers run at once on localhost (each idle while the other is measured) so the sides interleave:
every round measures default, publishing and publishing + attach in a rotated order, at each
concurrency. A measurement is ``concurrency × requests_per_slot`` greedy chat completions through the
``openai`` client, ``ignore_eos`` so every request makes exactly ``--max-tokens`` tokens; throughput is
their output tokens ÷ wall time. Medians over rounds; the ratios are the point (absolute tokens/s swing
between runs here). The attach runs on the same cores as the server (2 here): on CPU its decoding
competes with the server's, which a GPU server does not see.
"""

from __future__ import annotations

import argparse
import concurrent.futures as cf
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

PROMPTS = [
    "Write a short story about a lighthouse keeper.",
    "Explain how a bicycle gear works.",
    "Describe a busy market in the morning.",
    "List ten things to pack for a hike, with a reason for each.",
    "Write a letter to a friend about a new job.",
    "Explain why the sky is blue to a child.",
    "Describe how to bake bread, step by step.",
    "Write a poem about the sea.",
]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start(argv: list[str], log: Path, env: dict) -> subprocess.Popen:
    with open(log, "wb") as f:
        return subprocess.Popen(
            argv, stdout=f, stderr=subprocess.STDOUT, env={**os.environ, **env}, start_new_session=True
        )


def wait_healthy(url: str, proc: subprocess.Popen, log: Path, timeout: float = 600) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            sys.exit(f"server exited:\n{log.read_text()[-2000:]}")
        try:
            urllib.request.urlopen(url + "/health", timeout=2).close()
            return
        except OSError:
            time.sleep(1)
    sys.exit(f"server did not start:\n{log.read_text()[-2000:]}")


def stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def measure(client, model: str, concurrency: int, per_slot: int, max_tokens: int) -> float:
    def one(i: int) -> int:
        r = client.chat.completions.create(
            model=model,
            messages=[{"role": "user", "content": PROMPTS[i % len(PROMPTS)]}],
            max_tokens=max_tokens,
            temperature=0,
            extra_body={"ignore_eos": True},
        )
        return r.usage.completion_tokens

    n = concurrency * per_slot
    start_t = time.perf_counter()
    with cf.ThreadPoolExecutor(concurrency) as pool:
        tokens = sum(pool.map(one, range(n)))
    return tokens / (time.perf_counter() - start_t)


def main() -> int:
    import openai

    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model")
    p.add_argument("--concurrency", default="1,8")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--per-slot", type=int, default=2, help="requests per concurrency slot per measurement")
    p.add_argument("--max-tokens", type=int, default=64)
    p.add_argument("--out", type=Path, help="also write the table here")
    args = p.parse_args()
    if args.model is None:
        from specterm.models.fetch import ensure_smollm2

        args.model = str(ensure_smollm2())
    levels = [int(c) for c in args.concurrency.split(",")]
    spec = json.dumps({"method": "ngram", "num_speculative_tokens": 4, "prompt_lookup_min": 2, "prompt_lookup_max": 4})
    common = [
        "--host",
        "127.0.0.1",
        "--enforce-eager",
        "--dtype",
        "float32",
        "--max-model-len",
        "2048",
        "--max-num-seqs",
        str(max(levels)),
        "--speculative-config",
        spec,
    ]
    tmp = Path(tempfile.mkdtemp(prefix="specterm-attach-bench-"))
    env = {"VLLM_CPU_KVCACHE_SPACE": "2", "VLLM_CACHE_ROOT": str(tmp / "vllm-cache"), "VLLM_NO_USAGE_STATS": "1"}
    sock = tmp / "vllm.sock"
    ports = {"default": free_port(), "publishing": free_port()}
    procs = {
        "default": start(
            [
                sys.executable,
                "-m",
                "vllm.entrypoints.openai.api_server",
                "--model",
                args.model,
                "--port",
                str(ports["default"]),
                *common,
            ],
            tmp / "default.log",
            env,
        ),
        "publishing": start(
            [
                sys.executable,
                "-m",
                "specterm",
                "vllm-serve",
                args.model,
                "--publish",
                str(sock),
                "--port",
                str(ports["publishing"]),
                *common,
            ],
            tmp / "publishing.log",
            env,
        ),
    }
    attach = None
    try:
        for name, proc in procs.items():
            wait_healthy(f"http://127.0.0.1:{ports[name]}", proc, tmp / f"{name}.log")
        clients = {
            n: openai.OpenAI(base_url=f"http://127.0.0.1:{ports[n]}/v1", api_key="none", timeout=600) for n in ports
        }
        for n in clients:  # warm-up: first requests pay one-off costs
            measure(clients[n], args.model, 2, 1, 16)
        sides = ["default", "publishing", "publishing+attach"]
        results: dict[tuple[str, int], list[float]] = {}
        for r in range(args.rounds):
            for c in levels:
                for side in sides[r % 3 :] + sides[: r % 3]:
                    server = side.split("+")[0]
                    if side.endswith("+attach"):
                        attach = subprocess.Popen(
                            [sys.executable, "-m", "specterm", "attach", str(sock), "--headless", "--no-record"],
                            stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE,
                            text=True,
                            start_new_session=True,
                        )
                        while "connected" not in (attach.stderr.readline() or "connected"):
                            pass
                    tps = measure(clients[server], args.model, c, args.per_slot, args.max_tokens)
                    if attach is not None:
                        attach.send_signal(signal.SIGINT)
                        attach.wait(30)
                        attach = None
                    results.setdefault((side, c), []).append(tps)
                    print(f"round {r + 1} c={c} {side:<18} {tps:7.1f} tok/s", flush=True)
        lines = [
            f"output throughput, median of {args.rounds} rounds ({args.max_tokens} tokens a request, "
            f"{args.per_slot} requests a slot; n-gram k=4; {Path(args.model).name})",
            f"{'concurrency':>11}  {'default':>9}  {'publishing':>10}  {'ratio':>6}  {'+ attach':>9}  {'ratio':>6}",
        ]
        for c in levels:
            base, pub, att = (statistics.median(results[(s, c)]) for s in sides)
            lines.append(f"{c:>11}  {base:>9.1f}  {pub:>10.1f}  {pub / base:>6.3f}  {att:>9.1f}  {att / base:>6.3f}")
        print("\n".join(lines))
        if args.out:
            args.out.write_text("\n".join(lines) + "\n")
    finally:
        if attach is not None:
            attach.kill()
        for proc in procs.values():
            stop(proc)
        shutil.rmtree(tmp, ignore_errors=True)  # the servers' logs, socket and vLLM cache
    return 0


if __name__ == "__main__":
    sys.exit(main())
