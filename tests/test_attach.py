"""``specterm attach`` on a real ``vllm serve`` (the CPU build), driven by the official ``openai`` client.

Two servers start once for the module (SmolLM2-135M-Instruct, the smallest real chat model here, so
they start in under a minute): one with n-gram speculation, one without, each launched by
``specterm vllm-serve`` (so with the publishing scheduler) on its own Unix socket in a temp dir and a
free localhost port. Every request is bounded (max_tokens) and every process started is stopped.
The last tests kill the speculation-off server mid-stream and start another in its place.
"""

from __future__ import annotations

import concurrent.futures as cf
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from specterm.engine import wire

pytestmark = pytest.mark.engine
openai = pytest.importorskip("openai")

NGRAM = json.dumps({"method": "ngram", "num_speculative_tokens": 4, "prompt_lookup_min": 2, "prompt_lookup_max": 4})
PROMPTS = [
    "Repeat exactly: the cat sat on the mat, the cat sat on the mat, the cat sat on the mat.",
    "Copy this list: red, green, blue, red, green, blue, red, green, blue.",
    "What is the capital of France?",
]
WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "The weather in a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    },
}
PERSON = {
    "type": "object",
    "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
    "required": ["name", "age"],
    "additionalProperties": False,
}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    def __init__(
        self,
        model: str,
        tmp: Path,
        name: str,
        *,
        spec: bool,
        env: dict | None = None,
        extra: tuple[str, ...] = (),
        plain_vllm: bool = False,
        cores: str = "0",
    ) -> None:
        """``extra``: more vLLM flags. ``plain_vllm``: started as a user's own ``vllm serve`` with the
        scheduler flag and ``SPECTERM_PUBLISH`` (not through ``specterm vllm-serve``, which refuses
        an address another server holds before vLLM starts)."""
        self.model, self.sock, self.port = model, tmp / f"{name}.sock", _free_port()
        self.log = tmp / f"{name}.log"
        head = ["specterm", "vllm-serve", model, "--publish", str(self.sock)]
        if plain_vllm:
            head = ["vllm.entrypoints.openai.api_server", "--model", model, "--scheduler-cls", wire.SCHEDULER_CLS]
            env = {"SPECTERM_PUBLISH": str(self.sock), **(env or {})}
        argv = [
            sys.executable,
            "-m",
            *head,
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--enforce-eager",
            "--dtype",
            "float32",
            "--max-model-len",
            "2048",
            "--max-num-seqs",
            "8",
            "--seed",
            "0",
            "--enable-auto-tool-choice",
            "--tool-call-parser",
            "hermes",
        ]  # for tools= with tool_choice
        if spec:
            argv += ["--speculative-config", NGRAM]
        argv += list(extra)
        # vLLM's own cache (model info, compile cache) is the session's (conftest: a temporary
        # directory, never ~/.cache/vllm), so a server finds the model-class inspection that the
        # earlier engines of the run already wrote instead of paying a subprocess of its own for it
        full_env = {
            **os.environ,
            "VLLM_CPU_KVCACHE_SPACE": "1",
            "VLLM_NO_USAGE_STATS": "1",
            # vLLM's automatic binding puts every server's worker on the same core (it keeps the
            # other for the server's own processes): servers that generate at once get a core each.
            "VLLM_CPU_OMP_THREADS_BIND": cores,
            **(env or {}),
        }
        with open(self.log, "wb") as log:
            self.proc = subprocess.Popen(
                argv, stdout=log, stderr=subprocess.STDOUT, env=full_env, start_new_session=True
            )
        self.url = f"http://127.0.0.1:{self.port}"
        self.client = openai.OpenAI(base_url=self.url + "/v1", api_key="none", timeout=120, max_retries=0)

    def wait_ready(self, timeout: float = 300) -> Server:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                pytest.fail(f"vllm serve exited {self.proc.returncode}:\n{self.log.read_text()[-3000:]}")
            try:
                with urllib.request.urlopen(self.url + "/health", timeout=2):
                    return self
            except OSError:
                time.sleep(1)
        self.stop()
        pytest.fail(f"vllm serve did not start in {timeout} s:\n{self.log.read_text()[-3000:]}")

    def chat(self, prompt: str, max_tokens: int = 48, **kw):
        return self.client.chat.completions.create(
            model=self.model, messages=[{"role": "user", "content": prompt}], max_tokens=max_tokens, temperature=0, **kw
        )

    def stop(self, sig: int = signal.SIGTERM) -> None:
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, sig)
            except ProcessLookupError:
                pass
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(10)


started: list = []
"""Every server and attach process a test started: stopped at the end of the module, failed tests too."""


class Attacher:
    """``specterm attach --json`` as a user runs it, in a subprocess; events parsed from its stdout."""

    def __init__(self, server: Server | list[Server], tmp: Path, name: str, *extra: str) -> None:
        """``server``: one, or several watched as a fleet (one ``attach`` on all their addresses)."""
        self.record = tmp / f"{name}.jsonl"
        self.out, self.err = tmp / f"{name}.out", tmp / f"{name}.err"
        servers = server if isinstance(server, list) else [server]
        argv = [
            sys.executable,
            "-m",
            "specterm",
            "attach",
            *(str(s.sock) for s in servers),
            "--json",
            "--record",
            str(self.record),
            *extra,
        ]
        with open(self.out, "wb") as out, open(self.err, "wb") as err:
            self.proc = subprocess.Popen(argv, stdout=out, stderr=err, start_new_session=True)
        started.append(self)
        self.wait_for(lambda ev: ev.get("message", "").startswith("connected to"), 60)

    def events(self) -> list[dict]:
        return [json.loads(line) for line in self.out.read_text().splitlines() if line.strip()]

    def wait_for(self, pred, timeout: float) -> dict:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            hit = next((e for e in self.events() if pred(e)), None)
            if hit is not None:
                return hit
            if self.proc.poll() is not None and not any(pred(e) for e in self.events()):
                pytest.fail(f"attach exited {self.proc.returncode}: {self.err.read_text()[-2000:]}")
            time.sleep(0.2)
        pytest.fail(f"attach never showed the event; stderr: {self.err.read_text()[-2000:]}")

    def finish(self, timeout: float = 60) -> list[dict]:
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.stop()
            pytest.fail("attach did not stop by itself")
        return self.events()

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


early: dict[str, object] = {}
"""Servers of a later module started while this one runs (``test_attach_dp``'s: see ``servers``)."""


@pytest.fixture(scope="module")
def servers(smollm2, tmp_path_factory, request):
    tmp = tmp_path_factory.mktemp("attach")
    spec = Server(smollm2, tmp, "spec", spec=True)
    plain = Server(smollm2, tmp, "plain", spec=False, cores="1")
    try:
        ready = spec.wait_ready(), plain.wait_ready(), tmp
        # A server's start is about 30 s of imports in three processes one after another, one core
        # busy of two, and this module's tests leave the other core half idle too. When the
        # data-parallel module runs later in this session, its servers start now, beside these
        # tests, and are stopped at the session's end if it never runs. Measured (both modules, 2
        # cores): 245 s → 205 s. Started beside these two servers instead, five starts at once
        # took longer than two then three (240 s).
        if "dp" not in early and any(item.path.name == "test_attach_dp.py" for item in request.session.items):
            from test_attach_dp import DpServers

            early["dp"] = running = DpServers(smollm2, tmp_path_factory.mktemp("dp"))
            request.config.add_cleanup(running.stop)
        yield ready
    finally:
        spec.stop()
        plain.stop()


def _by_request(events: list[dict]) -> dict[str, dict]:
    out: dict[str, dict] = {}
    for e in events:
        rid = e.get("request_id")
        if rid is None:
            continue
        r = out.setdefault(rid, {"steps": [], "ids": []})
        if e["type"] == "request_started":
            r["started"] = e
        elif e["type"] == "spec_step":
            r["steps"].append(e)
            r["ids"] += [t["id"] for t in e["tokens"]]
        elif e["type"] == "request_finished":
            r["finished"] = e
    return out


def _metrics(server: Server) -> dict[str, int]:
    from specterm.session.metrics import scrape_spec_counters

    return scrape_spec_counters(server.url + "/metrics")


def _settled_metrics(server: Server) -> dict[str, int]:
    """The API server records a step's counters when it handles the step's outputs, which can be a
    moment after the publisher sent the step: read until two reads agree."""
    last = _metrics(server)
    for _ in range(20):
        time.sleep(0.25)
        now = _metrics(server)
        if now == last:
            return now
        last = now
    return last


def test_concurrent_clients_every_request_seen_and_counts_reconcile(servers):
    spec, _plain, tmp = servers
    att = Attacher(spec, tmp, "concurrent", "--max-requests", "5", "--metrics", spec.url + "/metrics")
    before = _metrics(spec)

    def streamed():
        chunks = spec.client.chat.completions.create(
            model=spec.model,
            messages=[{"role": "user", "content": PROMPTS[1]}],
            max_tokens=48,
            temperature=0,
            stream=True,
        )
        return "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)

    with cf.ThreadPoolExecutor(5) as pool:
        plain_f = pool.submit(spec.chat, PROMPTS[0])
        tool_f = pool.submit(
            spec.chat,
            "What is the weather in Paris?",
            tools=[WEATHER],
            tool_choice={"type": "function", "function": {"name": "get_weather"}},
        )
        schema_f = pool.submit(
            spec.chat,
            "Invent a person.",
            response_format={"type": "json_schema", "json_schema": {"name": "person", "schema": PERSON}},
        )
        stream_f = pool.submit(streamed)
        third_f = pool.submit(spec.chat, PROMPTS[2])
        plain, tool, schema, stream, third = (
            f.result(timeout=300) for f in (plain_f, tool_f, schema_f, stream_f, third_f)
        )
    events = att.finish()
    after = _settled_metrics(spec)
    assert att.proc.returncode == 0, att.err.read_text()
    reqs = _by_request(events)
    finished = {rid: r for rid, r in reqs.items() if "finished" in r}
    assert len(finished) == 5
    texts = sorted(r["finished"]["text"] for r in finished.values())
    call = tool.choices[0].message.tool_calls[0]
    assert call.function.name == "get_weather"
    expected = sorted(
        [plain.choices[0].message.content, schema.choices[0].message.content, stream, third.choices[0].message.content]
    )
    # the tool call's text is the call as the model wrote it (in the tool parser's own format), which
    # vLLM parsed into the client's tool_calls
    tool_text = next(t for t in texts if t not in expected)
    assert call.function.name in tool_text
    assert sorted(t for t in texts if t != tool_text) == expected
    for r in finished.values():  # each stream is its own: verdicts per step follow the rule
        assert r["started"]["prompt_tokens"] > 0
        for s in r["steps"]:
            verdicts = [t["verdict"] for t in s["tokens"]]
            k = len(s["drafted"]) + s["invalid_drafts"]
            if k == 0:
                assert set(verdicts) == {"target"}
            else:
                a = min(s["accepted"], len(verdicts))  # the last step may be cut by a stop (events.SpecStep)
                assert verdicts[:a] == ["accepted"] * a
    structured = [r for r in finished.values() if r["started"]["params"]["json_schema"]]
    assert len(structured) == 2  # named tool_choice and the JSON schema run under a grammar
    # reconciliation: the events' counts equal the server's own spec-decode counters over the same requests
    steps = [s for r in finished.values() for s in r["steps"]]
    ours = {
        "drafts": sum(1 for s in steps if s["drafted"] or s["invalid_drafts"]),
        "draft_tokens": sum(len(s["drafted"]) for s in steps),
        "accepted": sum(s["accepted"] for s in steps),
    }
    assert ours == {k: after[k] - before[k] for k in ours}
    assert ours["accepted"] > 0
    counters = [e for e in events if e["type"] == "engine_counters"]
    assert counters and counters[-1]["matched"], counters
    # the recording is a session replay opens
    from specterm.session.reader import read_session

    data = read_session(att.record)
    assert data.header.config["attach"].endswith("spec.sock")
    assert sum(e.type == "request_finished" for e in data.events) == 5


def test_greedy_output_equals_speculation_off_under_batching(servers):
    """Two servers, one with speculation and one without, watched by one ``attach``: every request is
    seen with the replica that ran it, each server reconciles with its own /metrics, and greedy
    output is token-identical between them under batching."""
    spec, plain, tmp = servers
    urls = [f"{s.url}/metrics" for s in (spec, plain)]
    att = Attacher([spec, plain], tmp, "lossless", "--max-requests", "6", "--metrics", urls[0], "--metrics", urls[1])
    with cf.ThreadPoolExecutor(6) as pool:  # three at once on each server: batched
        a = [pool.submit(spec.chat, p, 64) for p in PROMPTS]
        b = [pool.submit(plain.chat, p, 64) for p in PROMPTS]
        out_spec = [f.result(timeout=300).choices[0].message.content for f in a]
        out_plain = [f.result(timeout=300).choices[0].message.content for f in b]
    assert out_spec == out_plain
    events = att.finish()
    assert att.proc.returncode == 0, att.err.read_text()
    replica = {e["request_id"]: e["replica"] for e in events if e["type"] == "request_started"}
    by_replica = {
        name: [r for rid, r in _by_request(events).items() if replica.get(rid) == name] for name in ("r1·0", "r2·0")
    }
    assert [len(v) for v in by_replica.values()] == [3, 3]
    ids_spec = sorted(r["ids"] for r in by_replica["r1·0"])
    ids_plain = sorted(r["ids"] for r in by_replica["r2·0"])
    assert ids_spec == ids_plain and all(ids_spec)
    # the server without speculation: attach works, every token is a target token, and it says why
    assert sum("speculation is off" in e.get("message", "") for e in events) == 1
    plain_ids = {rid for rid, name in replica.items() if name == "r2·0"}
    verdicts = {
        t["verdict"] for e in events if e["type"] == "spec_step" and e["request_id"] in plain_ids for t in e["tokens"]
    }
    assert verdicts == {"target"}
    # each replica against its own counters: the speculative one drafted, the other has none
    counters = {e["replica"]: e for e in events if e["type"] == "engine_counters"}
    assert set(counters) == {"r1·0", "r2·0"} and all(c["matched"] for c in counters.values()), counters
    assert counters["r1·0"]["ours"]["drafts"] > 0 and counters["r2·0"]["ours"]["drafts"] == 0
    err = att.err.read_text()
    assert "r1·0: verdicts reconcile" in err and "r2·0: verdicts reconcile" in err
    seen = {e["replica"]: e for e in events if e["type"] == "replica"}
    assert seen["r1·0"]["speculation"]["method"] == "ngram" and seen["r2·0"]["speculation"] is None


def test_conversation_steps_are_grouped_with_their_cache_hits(servers):
    spec, _plain, tmp = servers
    att = Attacher(spec, tmp, "conversation", "--max-requests", "3")
    messages = [
        {"role": "system", "content": "You are a terse assistant. " * 20},
        {"role": "user", "content": "Name a colour."},
    ]
    for follow_up in ("Name another one.", None):
        reply = spec.client.chat.completions.create(model=spec.model, messages=messages, max_tokens=16, temperature=0)
        messages += [{"role": "assistant", "content": reply.choices[0].message.content}]
        if follow_up:
            messages += [{"role": "user", "content": follow_up}]
    spec.chat("Something unrelated entirely.", 8)
    reqs = sorted(_by_request(att.finish()).values(), key=lambda r: r["started"]["t"])
    convs = [(r["started"]["conversation"], r["started"]["turn"]) for r in reqs]
    assert convs[0][1] == 1 and convs[1] == (convs[0][0], 2)
    assert convs[2][0] != convs[0][0] and convs[2][1] == 1
    assert reqs[1]["finished"]["cached_tokens"] >= 32  # the second step found the first in the prefix cache


def test_bad_addresses_are_one_line(tmp_path, servers):
    from specterm.cli import main

    def one_line(*argv):
        proc = subprocess.run(
            [sys.executable, "-m", "specterm", "attach", *argv], capture_output=True, text=True, timeout=60
        )
        lines = proc.stderr.strip().splitlines()
        assert proc.returncode != 0 and len(lines) == 1 and lines[0].startswith("specterm: error: "), proc.stderr
        return lines[0]

    assert "vllm-serve" in one_line(str(tmp_path / "none.sock"))
    assert "nothing is listening" in one_line(f"tcp://127.0.0.1:{_free_port()}", "--token", "x")
    assert "needs the server's token" in one_line("tcp://127.0.0.1:1")
    # a stale socket file left by a killed server
    stale = tmp_path / "stale.sock"
    with socket.socket(socket.AF_UNIX) as s:
        s.bind(str(stale))
    assert "gone" in one_line(str(stale))
    # a server publishing another event version (its sidecar says so)
    spec, _plain, _tmp = servers
    side = spec.sock.with_name(spec.sock.name + ".json")
    original = side.read_bytes()
    try:
        side.write_text(json.dumps({**json.loads(original), "version": 99}))
        assert "event version 99" in one_line(str(spec.sock))
    finally:
        side.write_bytes(original)
    assert main(["vllm-serve", "m", "--publish", "tcp://127.0.0.1", "--dry-run"]) != 0


def test_socket_of_another_user_is_refused(tmp_path):
    if os.getuid() != 0:
        pytest.skip("needs root to make a socket owned by another user")
    from specterm.session.attach import AttachError, check_address

    d = tmp_path / "other"
    d.mkdir()
    sock = d / "vllm.sock"
    with socket.socket(socket.AF_UNIX) as s:
        s.bind(str(sock))
        s.listen()
        os.chown(sock, 65534, 65534)
        with pytest.raises(AttachError, match="another user"):
            check_address(f"ipc://{sock}")


def test_server_killed_mid_stream_then_back(servers):
    """One of two servers watched together dies mid-request: attach says so, the recording keeps what
    came, and the other server goes on being followed; a new server on the same socket is found again
    by itself and named as a restart."""
    spec, plain, tmp = servers
    att = Attacher([spec, plain], tmp, "killed")
    import threading

    def client():  # reads its stream until the server dies under it
        try:
            for _ in plain.client.chat.completions.create(
                model=plain.model,
                messages=[{"role": "user", "content": "Count from 1 to 500, one per line."}],
                max_tokens=1000,
                temperature=0,
                stream=True,
                extra_body={"ignore_eos": True},
            ):
                pass
        except Exception:  # noqa: BLE001 - the connection breaks: expected
            pass

    reader = threading.Thread(target=client, daemon=True)
    reader.start()
    att.wait_for(lambda e: e["type"] == "spec_step" and e["index"] >= 10, 120)
    plain.stop(signal.SIGKILL)
    lost = att.wait_for(lambda e: "lost the server" in e.get("message", ""), 60)
    ended = att.wait_for(lambda e: e["type"] == "request_finished", 10)
    assert ended["finish_reason"] == "server stopped" and ended["output_tokens"] >= 10 and ended["text"]
    reader.join(30)
    spec.chat(PROMPTS[0], 8)  # the other replica, while this one is down
    att.wait_for(
        lambda e: e["type"] == "request_finished" and e["t"] > lost["t"] and e["finish_reason"] != "server stopped", 60
    )
    # another server on the same socket (a small queue, for the next test): attach reconnects by itself
    again = Server(plain.model, tmp, "plain", spec=True, env={"SPECTERM_PUBLISH_BUFFER": "2"}, cores="1").wait_ready()
    servers_restarted.append(again)
    started.append(again)
    again.chat(PROMPTS[2], 8)
    att.wait_for(lambda e: "restarted" in e.get("message", ""), 60)
    back = att.wait_for(lambda e: e["type"] == "replica" and e["restarted"], 10)
    assert back["replica"] == "r2·0"
    new = att.wait_for(
        lambda e: e["type"] == "request_started" and e.get("replica") == "r2·0" and e["t"] >= back["t"], 60
    )
    done = att.wait_for(lambda e: e["type"] == "request_finished" and e["request_id"] == new["request_id"], 60)
    assert done["finish_reason"] != "server stopped"
    att.stop()
    from specterm.session.reader import read_session

    recorded = read_session(att.record).events
    assert any(e.type == "request_finished" and e.finish_reason == "server stopped" for e in recorded)


servers_restarted: list[Server] = []


@pytest.fixture(scope="module", autouse=True)
def _stop_everything():
    yield
    for p in reversed(started):
        p.stop()


def test_tcp_needs_the_token_and_an_empty_subscription_gets_nothing():
    """Over TCP the publisher grants one subscription, its token: a viewer without it (or with the
    empty prefix that would match everything) is connected but receives nothing."""
    import zmq

    from specterm.engine import wire
    from specterm.engine.publish import Publisher

    with pytest.raises(ValueError, match="needs a token"):
        Publisher(
            f"tcp://127.0.0.1:{_free_port()}", None, wire.Hello(version=1, model="m", tokenizer="t", spec=None, pid=1)
        )
    addr = f"tcp://127.0.0.1:{_free_port()}"
    pub = Publisher(addr, "s3cret", wire.Hello(version=wire.WIRE_VERSION, model="m", tokenizer="t", spec=None, pid=1))
    ctx = zmq.Context.instance()
    subs = {}
    for name, topic in (("token", b"s3cret"), ("empty", b""), ("wrong", b"guess"), ("unix-topic", wire.TOPIC)):
        s = ctx.socket(zmq.SUB)
        s.setsockopt(zmq.SUBSCRIBE, topic)
        s.connect(addr)
        subs[name] = s
    try:
        deadline = time.monotonic() + 10
        while pub.peers < 4 and time.monotonic() < deadline:
            pub.poll()
            time.sleep(0.02)
        assert pub.peers == 4
        for _ in range(20):
            pub.send(wire.Batch(t=0.0, wall=0.0, dropped=0))
            pub.poll()
            time.sleep(0.02)
        got = {name: s.poll(500) != 0 for name, s in subs.items()}
        assert got == {"token": True, "empty": False, "wrong": False, "unix-topic": False}
        topic, payload = subs["token"].recv_multipart()
        assert topic == b"s3cret" and isinstance(wire.decode(payload), wire.Hello)
    finally:
        for s in subs.values():
            s.close(linger=0)
        pub.close("test over")


def test_publisher_drops_and_counts_instead_of_waiting(tmp_path):
    """The socket half alone: a subscriber that never reads fills its queue (2 batches), and every
    further send returns at once, counted as dropped."""
    import zmq

    from specterm.engine import wire
    from specterm.engine.publish import Publisher

    path = tmp_path / "pub" / "x.sock"
    pub = Publisher(
        f"ipc://{path}",
        None,
        wire.Hello(version=wire.WIRE_VERSION, model="m", tokenizer="t", spec=None, pid=1),
        buffer=2,
    )
    assert oct(path.stat().st_mode & 0o777) == "0o600" and oct(path.parent.stat().st_mode & 0o777) == "0o700"
    assert not pub.poll()  # nobody there: the scheduler captures nothing
    stalled = zmq.Context.instance().socket(zmq.SUB)
    stalled.setsockopt(zmq.RCVHWM, 1)
    stalled.setsockopt(zmq.SUBSCRIBE, wire.TOPIC)
    stalled.connect(f"ipc://{path}")
    try:
        deadline = time.monotonic() + 60  # bounded, not timed: a loaded machine can take seconds to connect
        while not (pub.poll() and pub.fresh) and time.monotonic() < deadline:
            time.sleep(0.02)
        assert pub.peers == 1 and pub.fresh
        rec = wire.Rec("r", [1, 2, 3, 4], [1, 2, 3, 4, 5], [1, 2, 3, 4, 5], 0, 0, None)
        for _ in range(2000):
            pub.send(wire.Batch(t=0.0, wall=0.0, dropped=pub.dropped, recs=[rec] * 8))
        assert pub.dropped > 1000
    finally:
        stalled.close(linger=0)
        pub.close("test over")
    assert not path.exists()


def test_a_subscriber_that_stops_reading_costs_drops_not_requests(servers):
    """A viewer that stops reading (its process suspended, as Ctrl+Z does) fills its queue (2 batches on
    this server); the server drops and counts, its requests finish exactly as without it, and once the
    viewer runs again it says how many steps it missed."""
    if not servers_restarted:
        pytest.skip("needs the server the previous test started")
    server = servers_restarted[0]
    # A long prompt (about 1,600 tokens; prefilled once, then from the prefix cache): each request's
    # first batch carries its prompt's ids to the viewer (about 4 KiB). What the kernel holds for a
    # stopped reader goes by the socket memory of each message more than by its bytes, so short step
    # batches take long to fill it (measured here: 8 requests of 100 tokens, a short prompt: nothing
    # dropped; of 200: 22 steps dropped, in 30 s), while 32 of these requests of 8 tokens each, 8 at
    # a time, fill it in about 10 s (14 to 23 steps dropped).
    notes = "".join(
        f"Note {i}: the {colour} shipment to warehouse {i % 7} left on day {i % 28 + 1} with {i * 3 % 50 + 10} boxes.\n"
        for i, colour in zip(range(64), ["red", "green", "blue", "grey", "white"] * 13)
    )
    prompt = notes + "Write a long story about a dragon who learns to bake bread."

    def ask():
        return server.chat(prompt, 8, extra_body={"ignore_eos": True}).choices[0].message.content

    expected = ask()
    _, _, tmp = servers
    att = Attacher(server, tmp, "dropped")
    att.proc.send_signal(signal.SIGSTOP)
    try:
        with cf.ThreadPoolExecutor(8) as pool:
            outs = [f.result(timeout=300) for f in [pool.submit(ask) for _ in range(32)]]
    finally:
        att.proc.send_signal(signal.SIGCONT)
    assert outs == [expected] * 32
    server.chat(PROMPTS[2], 8)  # the next batch that gets through carries the count
    drop = att.wait_for(lambda e: "dropped by the server" in e.get("message", ""), 60)
    assert int(drop["message"].split()[0]) > 0
    att.stop()


def test_an_unreadable_message_is_a_warning_and_another_version_one_line():
    from specterm.engine import wire
    from specterm.session.attach import Attach, AttachError

    events = []
    attach = Attach("ipc:///nowhere/vllm.sock", events.append)
    attach.handle(b"not msgpack at all")
    assert events and events[-1].level == "warning" and "cannot read" in events[-1].message
    newer = wire.ENCODER.encode(wire.Hello(version=wire.WIRE_VERSION + 1, model="m", tokenizer="t", spec=None, pid=1))
    with pytest.raises(AttachError, match=f"event version {wire.WIRE_VERSION + 1}"):
        attach.handle(newer)


def test_attach_and_vllm_serve_read_an_address_alike(capsys):
    """One reader of a typed address (``wire.user_endpoint``): an unknown scheme or a tcp:// without a
    port is the same one line from both commands (attach's was a traceback for the port)."""
    from specterm.cli import main

    for scheme, message in (
        ("udp://x", "unsupported address 'udp://x'"),
        ("tcp://127.0.0.1", "expected tcp://HOST:PORT"),
    ):
        for argv in (["attach", scheme, "--token", "x"], ["vllm-serve", "m", "--publish", scheme, "--dry-run"]):
            assert main(argv) != 0
            err = capsys.readouterr().err
            assert err.startswith("specterm: error: ") and message in err and err.count("\n") == 1, err


def test_check_address_hands_on_the_sidecar_it_read(tmp_path):
    """``check_address`` reads the server's sidecar once and returns its hello: ``Attach`` starts from
    it instead of reading the file again."""
    from specterm.engine import wire
    from specterm.session.attach import check_address

    hello = wire.Hello(version=wire.WIRE_VERSION, model="m", tokenizer="t", spec=None, pid=1)
    path = tmp_path / "vllm.sock"
    with socket.socket(socket.AF_UNIX) as s:
        s.bind(str(path))
        s.listen()
        wire.sidecar(path).write_bytes(wire.msgspec.json.encode(hello))
        assert check_address(f"ipc://{path}") == hello
        wire.sidecar(path).unlink()
        assert check_address(f"ipc://{path}") is None


def test_publishers_one_after_another_in_one_process_each_see_their_viewer(tmp_path):
    """A closed publisher's monitor must not answer for the next one (pyzmq names a monitor after the
    socket's fd, and a new socket often reuses the fd: the next publisher then never saw a viewer)."""
    import zmq

    from specterm.engine import wire
    from specterm.engine.publish import Publisher

    for i in range(4):
        path = tmp_path / f"p{i}" / "x.sock"
        pub = Publisher(
            f"ipc://{path}", None, wire.Hello(version=wire.WIRE_VERSION, model="m", tokenizer="t", spec=None, pid=1)
        )
        viewer = zmq.Context.instance().socket(zmq.SUB)
        viewer.setsockopt(zmq.SUBSCRIBE, wire.TOPIC)
        viewer.connect(f"ipc://{path}")
        try:
            deadline = time.monotonic() + 30  # bounded, not timed
            while not pub.poll() and time.monotonic() < deadline:
                time.sleep(0.02)
            assert pub.peers == 1, f"publisher {i} saw no viewer"
        finally:
            viewer.close(linger=0)
            pub.close("next")
