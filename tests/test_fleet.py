"""One ``attach`` on a fleet (``session/fleet.py``), without vLLM: real ``Publisher``s (the socket half
of ``PublishingScheduler``, ``engine/publish.py``) on real Unix sockets, driven by the test as the
scheduler drives them, and a real ``Fleet`` reading them with a real tokenizer (the tiny pair's).
Servers with real vLLM behind them: ``tests/test_attach.py`` (two servers and a restart) and
``tests/test_attach_dp.py`` (a data-parallel server's ranks)."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import pytest

from specterm.engine import wire
from specterm.engine.publish import Publisher
from specterm.errors import ConfigError
from specterm.events import Error, ReplicaSeen, RequestFinished, RequestStarted, SpecStep
from specterm.session.fleet import Fleet, Target, load_fleet_file


class Scheduler:
    """A ``Publisher`` at ``path`` and the steps a scheduler would publish, sent once a viewer listens."""

    def __init__(self, path: Path, tokenizer: str, *, rank: int = 0, pid: int = 1000) -> None:
        hello = wire.Hello(
            version=wire.WIRE_VERSION,
            model="tiny",
            tokenizer=tokenizer,
            spec={"method": "ngram", "num_speculative_tokens": 2},
            pid=pid,
            dp_index=rank,
            instance=os.urandom(8).hex(),
        )
        self.path = path
        self.pub = Publisher(f"ipc://{path}", None, hello)

    def wait_for_viewer(self, viewers: int = 1, timeout: float = 30) -> None:
        deadline = time.monotonic() + timeout  # bounded, not timed
        while time.monotonic() < deadline:
            if self.pub.poll() and self.pub.fresh and self.pub.peers >= viewers:
                return
            time.sleep(0.02)
        pytest.fail(f"no viewer subscribed to {self.path}")

    def request(self, rid: str, prompt: list[int], out: list[int]) -> None:
        """One request: opened with its first step (k = 2, both drafts kept), then finished."""
        opened = wire.ReqOpen(rid, prompt, [], time.time(), 0, 16, 0.0, False)
        first, rest = out[:3], out[3:]
        self.pub.send(
            wire.Batch(
                t=time.time(),
                wall=0.01,
                dropped=0,
                opened=[opened],
                recs=[wire.Rec(rid, first[:2], first, first, 0, 0, None)],
                batch_size=1,
            )
        )
        self.pub.send(
            wire.Batch(
                t=time.time(),
                wall=0.01,
                dropped=0,
                recs=[wire.Rec(rid, [], rest, rest, 0, 0, None)],
                done=[wire.ReqDone(rid, "length", 0)],
                batch_size=1,
            )
        )

    def close(self) -> None:
        self.pub.close("test over")


class Watch:
    """A ``Fleet`` on its own thread, collecting what it emits."""

    def __init__(self, targets: list[Target], **kw) -> None:
        self.events: list = []
        self.lock = threading.Lock()
        self.fleet = Fleet(targets, self._sink, **kw)
        self.thread = threading.Thread(target=self.fleet.run, daemon=True)
        self.thread.start()

    def _sink(self, ev) -> None:
        with self.lock:
            self.events.append(ev)

    def of(self, kind) -> list:
        with self.lock:
            return [e for e in self.events if isinstance(e, kind)]

    def until(self, pred, timeout: float = 30):
        deadline = time.monotonic() + timeout  # bounded, not timed
        while time.monotonic() < deadline:
            with self.lock:
                hit = next((e for e in self.events if pred(e)), None)
            if hit is not None:
                return hit
            time.sleep(0.02)
        pytest.fail(f"never seen; got {[type(e).__name__ for e in self.events]}")

    def stop(self) -> None:
        self.fleet.stop()
        self.thread.join(10)
        assert not self.thread.is_alive()


@pytest.fixture(scope="module")
def tok(tiny_pair):
    return tiny_pair[0]


@pytest.fixture
def sock_dir():
    # Unix socket paths are short (108 bytes): not pytest's long tmp_path
    import shutil
    import tempfile

    d = Path(tempfile.mkdtemp(prefix="stf-"))
    yield d
    shutil.rmtree(d, ignore_errors=True)


def _warnings(w: Watch) -> list[str]:
    return [e.message for e in w.of(Error)]


def test_two_servers_and_a_rank_found_by_itself_in_one_view(sock_dir, tok):
    """Server A (two DP ranks: rank 1 beside rank 0, ``wire.for_rank``) and server B: one fleet on A's
    rank 0 and B finds A's rank 1 itself; every request carries its replica·rank, and an agent whose
    next step went to another server stays one conversation."""
    a0 = Scheduler(sock_dir / "a.sock", tok)
    a1 = Scheduler(Path(wire.for_rank(f"ipc://{sock_dir / 'a.sock'}", 1).removeprefix("ipc://")), tok, rank=1)
    b = Scheduler(sock_dir / "b.sock", tok, pid=2000)
    w = Watch([Target(f"ipc://{a0.path}"), Target(f"ipc://{b.path}", name="b")])
    try:
        for s in (a0, a1, b):
            s.wait_for_viewer()
        a0.request("q1", [1, 2, 3, 4], [5, 6, 7, 8])
        a1.request("q2", [9, 10, 11], [12, 13, 14, 15])
        b.request("q3", [1, 2, 3, 4, 5, 6, 7, 8, 20], [21, 22, 23, 24])  # q1's prompt + answer + more
        w.until(lambda e: isinstance(e, RequestFinished) and e.request_id == "q3")
        w.until(lambda e: isinstance(e, RequestFinished) and e.request_id == "q2")
        started = {e.request_id: e for e in w.of(RequestStarted)}
        assert {rid: e.replica for rid, e in started.items()} == {"q1": "r1·0", "q2": "r1·1", "q3": "b·0"}
        assert {e.replica: e.dp_index for e in w.of(ReplicaSeen)} == {"r1·0": 0, "r1·1": 1, "b·0": 0}
        assert (started["q3"].conversation, started["q3"].turn) == (started["q1"].conversation, 2)
        assert any("found data-parallel rank 1 of r1" in m for m in _warnings(w))
        steps = [e for e in w.of(SpecStep) if e.request_id == "q1"]
        assert [t.verdict for t in steps[0].tokens] == ["accepted", "accepted", "bonus"]
    finally:
        w.stop()
        for s in (a0, a1, b):
            s.close()


def test_one_publisher_under_two_addresses_is_followed_once(sock_dir, tok):
    """The same address twice, and the same publisher under another path (a symlink): each said once,
    and its requests are seen once."""
    a = Scheduler(sock_dir / "a.sock", tok)
    link = sock_dir / "link.sock"
    link.symlink_to(a.path)
    addr = f"ipc://{a.path}"
    w = Watch([Target(addr), Target(addr), Target(f"ipc://{link}")], probe=False)
    try:
        a.wait_for_viewer(viewers=2)
        a.request("q1", [1, 2, 3], [4, 5, 6, 7])  # the link has no sidecar: its hello comes with this
        w.until(lambda e: isinstance(e, Error) and "same publisher" in e.message)
        w.until(lambda e: isinstance(e, RequestFinished))
        time.sleep(0.3)  # a second copy would come right behind the first
        assert [e.request_id for e in w.of(RequestStarted)] == ["q1"]
        said = _warnings(w)
        assert sum("given twice" in m for m in said) == 1 and sum("same publisher" in m for m in said) == 1
        assert len(w.fleet.replicas) == 1
    finally:
        w.stop()
        a.close()


def test_a_server_that_comes_up_later_is_picked_up_and_ids_stay_apart(sock_dir, tok):
    """B is not up when the fleet starts (one line); once it is, its requests appear. Both servers use
    the id ``req-1``: the second is shown as ``req-1@b·0``, not merged with the first."""
    from specterm.cli.attach import check_targets

    a = Scheduler(sock_dir / "a.sock", tok)
    targets = [Target(f"ipc://{a.path}", name="a"), Target(f"ipc://{sock_dir / 'b.sock'}", name="b")]
    hellos, notes = check_targets(targets)
    assert (
        len(notes) == 1 and notes[0].startswith("b: no server publishes at") and "followed when it comes up" in notes[0]
    )
    w = Watch(targets, hellos=hellos, notes=notes, probe=False)
    b = None
    try:
        a.wait_for_viewer()
        a.request("req-1", [1, 2, 3], [4, 5, 6, 7])
        w.until(lambda e: isinstance(e, RequestFinished) and e.request_id == "req-1")
        b = Scheduler(sock_dir / "b.sock", tok, pid=2000)
        b.wait_for_viewer()
        b.request("req-1", [7, 8, 9], [10, 11, 12, 13])
        done = w.until(lambda e: isinstance(e, RequestFinished) and e.request_id == "req-1@b·0")
        assert done.output_tokens == 4
        assert [e.replica for e in w.of(RequestStarted)] == ["a·0", "b·0"]
        assert sum("no server publishes at" in m for m in _warnings(w)) == 1
    finally:
        w.stop()
        a.close()
        if b is not None:
            b.close()


def test_fleet_file_and_flags_bad_input_is_one_line(tmp_path, monkeypatch):
    from specterm.cli import build_parser
    from specterm.cli.attach import targets_from_args

    def targets(*argv):
        return targets_from_args(build_parser().parse_args(["attach", *argv]))

    good = tmp_path / "fleet.toml"
    good.write_text(
        '[[replica]]\nname = "pod-a"\naddr = "tcp://10.0.0.5:5557"\ntoken_env = "POD_A"\n'
        'metrics = "http://10.0.0.5:8000/metrics"\n\n[[replica]]\naddr = "/run/b.sock"\n'
    )
    monkeypatch.setenv("POD_A", "s3cret")
    got = targets("--fleet", str(good))
    assert [(t.name, t.addr, t.token, t.metrics) for t in got] == [
        ("pod-a", "tcp://10.0.0.5:5557", "s3cret", "http://10.0.0.5:8000/metrics"),
        ("r2", "ipc:///run/b.sock", None, None),
    ]
    assert [t.token for t in targets("tcp://h:1", "tcp://h:2", "--token", "x", "--token", "y")] == ["x", "y"]
    cases = {
        ("--fleet", str(tmp_path / "none.toml")): "cannot read the fleet file",
        ("--fleet", str(good), "a.sock"): "give no ADDR",
        ("a.sock", "b.sock", "--token", "x", "--token", "y", "--token", "z"): "3 --token for 2 addresses",
        ("a.sock", "b.sock", "--metrics", "http://x/metrics"): "1 --metrics for 2 addresses",
        ("tcp://h:1", "b.sock"): "tcp://h:1 needs the server's token",
    }
    for argv, said in cases.items():
        with pytest.raises(ConfigError, match=said):
            targets(*argv)
    monkeypatch.delenv("POD_A")
    with pytest.raises(ConfigError, match=r"takes its token from \$POD_A, which is not set"):
        targets("--fleet", str(good))
    for text, said in {
        "[[replica]]\nname = 1\n": "replica.0.addr: Field required",
        '[[replica]]\naddr = "a.sock"\nport = 1\n': "replica.0.port: Extra inputs",
        '[[replica]]\naddr = "a"\nname = "x"\n[[replica]]\naddr = "b"\nname = "x"\n': "two replicas are named 'x'",
        "[[replica]\n": "is not TOML",
    }.items():
        bad = tmp_path / "bad.toml"
        bad.write_text(text)
        with pytest.raises(ConfigError, match=said):
            load_fleet_file(bad, {}) if "named" not in said else targets("--fleet", str(bad))


def test_a_metrics_url_that_cannot_be_read_is_one_line_not_a_crash():
    """A replica whose /metrics is down (at the start or the end) is not reconciled, in one line; the
    fleet's other replicas are reconciled all the same (``Fleet.reconcile`` skips only that URL)."""
    import socket

    from specterm.session.fleet import scrape_all
    from specterm.session.metrics import spec_counters_by_engine

    with socket.socket() as s:  # a port nothing listens on (bound, then closed)
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    url = f"http://127.0.0.1:{port}/metrics"
    got = scrape_all([url, url], spec_counters_by_engine)
    assert list(got) == [url] and isinstance(got[url], str)
    assert got[url].startswith(f"cannot read {url}: ") and "\n" not in got[url]


def test_conversations_by_index_agree_with_the_longest_prefix_rule():
    """``Conversations`` is indexed (prefix hashes) rather than scanned: on agent-like traffic (many
    conversations sharing a system prompt, each step the last prompt plus more, repeats, strays) it
    places every request where the plain rule does: the conversation whose prompt is the longest
    prefix of the new one, else a new conversation."""
    import random

    from specterm.session.conversations import Conversations

    rng = random.Random(7)
    system = [rng.randrange(50) for _ in range(30)]
    naive: list[list] = []  # [name, prompt, turns]
    conv = Conversations()
    live: list[list[int]] = []
    for _ in range(600):
        roll = rng.random()
        if live and roll < 0.6:  # an agent's next step: its last prompt, its answer, a tool result
            prompt = rng.choice(live) + [rng.randrange(50) for _ in range(rng.randrange(0, 6))]
        elif live and roll < 0.7:  # a prompt cut short: no conversation's whole prompt fits in it
            base = rng.choice(live)
            prompt = base[: rng.randrange(1, len(base) + 1)]
        else:  # a new conversation on the shared system prompt
            prompt = system + [rng.randrange(50) for _ in range(rng.randrange(1, 8))]
        best = None
        for c in naive:
            if len(c[1]) <= len(prompt) and prompt[: len(c[1])] == c[1] and (best is None or len(c[1]) > len(best[1])):
                best = c
        if best is None:
            best = [f"c{len(naive) + 1}", list(prompt), 1]
            naive.append(best)
        else:
            best[1], best[2] = list(prompt), best[2] + 1
        assert conv.place(prompt) == (best[0], best[2])
        live.append(prompt)
    assert len(naive) > 20 and max(c[2] for c in naive) > 5


def test_drops_made_before_a_viewer_came_are_not_its_own(sock_dir, tok):
    """A batch carries the publisher's running total of drops; a viewer that connects after the server
    dropped steps for someone else reports none of them as its own."""
    a = Scheduler(sock_dir / "a.sock", tok)
    a.pub.dropped = 7  # steps an earlier viewer missed
    w = Watch([Target(f"ipc://{a.path}")], probe=False)
    try:
        a.wait_for_viewer()
        a.request("q1", [1, 2, 3], [4, 5, 6, 7])
        w.until(lambda e: isinstance(e, RequestFinished))
        assert not any("dropped by the server" in m for m in _warnings(w))
    finally:
        w.stop()
        a.close()
