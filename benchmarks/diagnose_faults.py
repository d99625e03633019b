"""Faults injected into a real served session, and whether the detectors find them (issue 44's goals).

Usage (defaults: SmolLM2-135M-Instruct as ``specterm models fetch smollm2`` builds it, n-gram k = 4)::

    python benchmarks/diagnose_faults.py [--requests 28] [--max-tokens 64] [--out DIR] [--json FILE]

One ``specterm vllm-serve`` (module form, 127.0.0.1, a free port, its process group stopped at the
end), and two sessions recorded from it by ``specterm attach --json --record`` with ``--metrics``,
each driven by the official ``openai`` client, greedy, one request at a time:

- **control**: ``--requests`` copy-and-extend prompts (n-gram's home ground) interleaved with as many
  open prose prompts, no fault: every finding in it is a false positive. This is the long real
  session the false-positive figure is taken on.
- **faulty**: the same copy prompts, then four faults, each a real event on the real server:

  - *a looping request*: a prompt whose greedy answer repeats one phrase until ``max_tokens``;
  - *a latency spike*: the server's whole process group stopped (SIGSTOP) for 1.5 s mid-request
    and continued, as a preemption or a swapped-out host would;
  - *a draft mismatched to the domain, mid-session*: after the copy phase, only open prose, which
    n-gram cannot copy from the prompt;
  - *a forced reconciliation mismatch*: ``attach`` is stopped while a request is still running, so
    the server's ``/metrics`` counts steps attach never saw.

Each session is then replayed (``specterm replay FILE --summary --json``) with the thresholds of
the config file, exactly as a user's replay runs the detectors, and every finding is matched to the
fault it should report: the right kind, on the right request or after the fault began. A fault with
no such finding is missed; any other finding is a false positive. Both are printed, and the goal
(every fault found, nothing else flagged, nothing flagged in the control) is checked at the end.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from schedule_serve import free_port  # the sibling benchmark's helpers (benchmarks/ is on sys.path)

NGRAM = {"method": "ngram", "num_speculative_tokens": 4, "prompt_lookup_min": 2, "prompt_lookup_max": 4}
SUBJECTS = [
    "the harbour at dawn", "a clockmaker's shop", "a storm over wheat fields", "an old lighthouse keeper",
    "a night train crossing mountains", "a market in the rain", "a fox in the snow", "a library after hours",
    "a kite over the beach", "a bakery before sunrise", "a ship in fog", "a garden in autumn",
    "a violin left on a bench", "a bridge at midnight", "a village festival", "a desert well",
]  # fmt: skip
LISTS = [
    "red, green, blue, yellow", "Monday, Tuesday, Wednesday, Thursday", "north, east, south, west",
    "one, two, three, four", "alpha, beta, gamma, delta", "spring, summer, autumn, winter",
    "apple, banana, cherry, plum", "copper, silver, gold, platinum",
]  # fmt: skip


def copy_prompt(i: int) -> str:
    items = LISTS[i % len(LISTS)]
    return f"Repeat this list three times, one copy per line: {items}. Then repeat it once more."


def prose_prompt(i: int) -> str:
    return f"Write a short, vivid paragraph about {SUBJECTS[i % len(SUBJECTS)]}. Use fresh words."


LOOP_PROMPT = "Write the words 'all work and no play' again and again, forever, with nothing else."


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--model", help="target model dir (default: SmolLM2-135M-Instruct, built if missing)")
    p.add_argument("--requests", type=int, default=28, help="copy prompts per session (and prose in the control)")
    p.add_argument("--prose", type=int, default=16, help="prose prompts after the faulty session's copy phase")
    p.add_argument("--max-tokens", type=int, default=64)
    p.add_argument("--loop-max-tokens", type=int, default=96)
    p.add_argument("--out", help="keep the sessions and logs here (default: a temporary dir, removed)")
    p.add_argument("--json", metavar="FILE", help="write the result as JSON")
    return p.parse_args(argv)


class Served:
    """``specterm vllm-serve`` (the publishing scheduler) in its own process group."""

    def __init__(self, model: str, tmp: Path) -> None:
        self.sock, self.port, self.log = tmp / "server.sock", free_port(), tmp / "server.log"
        argv = [sys.executable, "-m", "specterm", "vllm-serve", model, "--publish", str(self.sock)]
        argv += ["--host", "127.0.0.1", "--port", str(self.port), "--dtype", "float32", "--enforce-eager"]
        argv += ["--max-model-len", "2048", "--max-num-seqs", "4", "--seed", "0"]
        argv += ["--speculative-config", json.dumps(NGRAM)]
        env = {**os.environ, "VLLM_CPU_KVCACHE_SPACE": "1", "VLLM_NO_USAGE_STATS": "1"}
        env["VLLM_CACHE_ROOT"] = str(tmp / "vllm-cache")  # not the user's ~/.cache/vllm
        with open(self.log, "wb") as f:
            self.proc = subprocess.Popen(argv, stdout=f, stderr=subprocess.STDOUT, env=env, start_new_session=True)
        self.url = f"http://127.0.0.1:{self.port}"

    def wait_ready(self, timeout: float = 600) -> None:
        import urllib.request

        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"vllm serve exited {self.proc.returncode}:\n{self.log.read_text()[-3000:]}")
            try:
                urllib.request.urlopen(self.url + "/health", timeout=2).close()
                return
            except OSError:
                time.sleep(1)
        raise RuntimeError(f"vllm serve did not start in {timeout:.0f} s")

    def signal(self, sig: int) -> None:
        os.killpg(self.proc.pid, sig)

    def stop(self) -> None:
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGCONT)
                os.killpg(self.proc.pid, signal.SIGTERM)
                self.proc.wait(30)
            except ProcessLookupError:
                pass
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(10)


class Attach:
    """``specterm attach SOCK --json --record FILE --metrics URL``; its stdout events parsed."""

    def __init__(self, served: Served, tmp: Path, name: str) -> None:
        self.record, self.out = tmp / f"{name}.jsonl", tmp / f"{name}.out"
        argv = [sys.executable, "-m", "specterm", "attach", str(served.sock), "--json", "--record", str(self.record)]
        argv += ["--metrics", served.url + "/metrics"]
        with open(self.out, "wb") as out, open(tmp / f"{name}.err", "wb") as err:
            self.proc = subprocess.Popen(argv, stdout=out, stderr=err, start_new_session=True)
        self.wait_for(lambda e: e.get("message", "").startswith("connected to"), 60)

    def events(self) -> list[dict]:
        return [json.loads(x) for x in self.out.read_text().splitlines() if x.strip()]

    def wait_for(self, pred, timeout: float) -> dict:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            hit = next((e for e in self.events() if pred(e)), None)
            if hit is not None:
                return hit
            time.sleep(0.2)
        raise RuntimeError("attach never showed the event")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            self.proc.wait(60)


def chat(client, model: str, prompt: str, max_tokens: int, **kw):
    return client.chat.completions.create(
        model=model, messages=[{"role": "user", "content": prompt}], max_tokens=max_tokens, temperature=0, **kw
    )


def last_request_id(att: Attach, after: float) -> str:
    done = att.wait_for(lambda e: e["type"] == "request_finished" and e["t"] >= after, 30)
    return done["request_id"]


def control(served: Served, client, model: str, args, tmp: Path) -> Path:
    att = Attach(served, tmp, "control")
    for i in range(args.requests):
        chat(client, model, copy_prompt(i), args.max_tokens)
        chat(client, model, prose_prompt(i), args.max_tokens)
    time.sleep(1)  # the last request's steps reach attach before it reconciles
    att.stop()
    return att.record


def faulty(served: Served, client, model: str, args, tmp: Path) -> tuple[Path, dict]:
    """The copy phase with a loop and a spike inside it, the prose phase, then attach stopped mid-request."""
    att = Attach(served, tmp, "faulty")
    faults: dict = {}
    spike_at = args.requests // 2
    for i in range(args.requests):
        if i == spike_at // 2:
            t0 = att.events()[-1]["t"]
            chat(client, model, LOOP_PROMPT, args.loop_max_tokens)
            faults["loop"] = {"request_id": last_request_id(att, t0)}
        if i == spike_at:
            t0 = att.events()[-1]["t"]
            stream = chat(client, model, copy_prompt(i), args.max_tokens, stream=True)
            for n, _chunk in enumerate(stream):
                if n == 8:  # mid-request: the server stops between two of its steps, or inside one
                    served.signal(signal.SIGSTOP)
                    time.sleep(1.5)
                    served.signal(signal.SIGCONT)
            faults["latency_spike"] = {"request_id": last_request_id(att, t0)}
            continue
        chat(client, model, copy_prompt(i), args.max_tokens)
    faults["collapse"] = {"after": att.events()[-1]["t"]}
    for i in range(args.prose):
        chat(client, model, prose_prompt(i), args.max_tokens)
    # A request still running when attach stops: the server's counters hold steps attach never saw.
    runner = threading.Thread(target=chat, args=(client, model, LOOP_PROMPT, 400), daemon=True)
    runner.start()
    att.wait_for(lambda e: e["type"] == "spec_step" and e["t"] > faults["collapse"]["after"] and e["index"] >= 5, 60)
    faults["mismatch"] = {}
    att.stop()
    runner.join(120)
    return att.record, faults


def findings(path: Path) -> list[dict]:
    proc = subprocess.run(
        [sys.executable, "-m", "specterm", "replay", str(path), "--summary", "--json"],
        capture_output=True, text=True, timeout=300, check=True,
    )  # fmt: skip
    return json.loads(proc.stdout)["findings"]


def match(found: list[dict], faults: dict) -> tuple[dict, list[dict]]:
    """Each fault's finding (or None), and the findings that match no fault."""
    hits: dict[str, dict | None] = {kind: None for kind in faults}
    extra = []
    for f in found:
        want = faults.get(f["kind"])
        ok = want is not None and hits[f["kind"]] is None
        if ok and "request_id" in want:
            ok = f.get("request_id") == want["request_id"]
        if ok and "after" in want:
            ok = f["t"] >= want["after"]
        if ok:
            hits[f["kind"]] = f
        else:
            extra.append(f)
    return hits, extra


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    import openai

    from specterm.models.fetch import ensure_smollm2

    model = args.model or str(ensure_smollm2())
    keep = Path(args.out) if args.out else None
    tmp = keep or Path(tempfile.mkdtemp(prefix="specterm-faults-"))
    tmp.mkdir(parents=True, exist_ok=True)
    served = Served(model, tmp)
    try:
        served.wait_ready()
        client = openai.OpenAI(base_url=served.url + "/v1", api_key="none", timeout=300, max_retries=0)
        chat(client, model, "Hello", 4)  # warm-up, before any session
        clean = control(served, client, model, args, tmp)
        bad, faults = faulty(served, client, model, args, tmp)
    finally:
        served.stop()
    result = {"control": {}, "faulty": {}}
    for name, path, want in (("control", clean, {}), ("faulty", bad, faults)):
        found = findings(path)
        hits, extra = match(found, want)
        with open(path) as f:
            steps = sum(1 for line in f if '"spec_step"' in line)
        result[name] = {
            "spec_steps": steps,
            "findings": len(found),
            "missed": [k for k, v in hits.items() if v is None],
        }
        result[name]["false_positives"] = [f"{f['kind']}: {f['message']}" for f in extra]
        print(f"{name}: {steps} spec steps, {len(found)} findings")
        for kind, f in hits.items():
            print(f"  {kind:14} {'FOUND  ' + f['message'] if f else 'MISSED'}")
        for f in extra:
            print(f"  false positive: {f['kind']}: {f['message']}")
    met = not result["control"]["findings"] and not result["faulty"]["missed"]
    met = met and not result["faulty"]["false_positives"]
    print(f"goal (every fault found, nothing else flagged, control clean): {'met' if met else 'NOT met'}")
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2) + "\n")
    if keep is None:
        import shutil

        shutil.rmtree(tmp, ignore_errors=True)
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())
