"""Data parallelism with the publishing scheduler, on a real ``vllm serve`` (the CPU build): each rank
publishes at its own address, and a rank that cannot publish is "not published", never a server that
fails to start (issue 45 item 1).

The regression: vLLM 0.32 reconfigures every rank of a dense model as an independent DP = 1 engine,
so ``parallel_config.data_parallel_rank`` is 0 on every rank; the publisher read it, rank 1 tried rank
0's socket, raised "another server already publishes", and the whole server died at start.

Two servers start once for the module, side by side (SmolLM2-135M, n-gram k = 4, bounded requests,
localhost only, every process stopped at the end): ``--data-parallel-size 2`` through ``specterm
vllm-serve``, and a user's own ``vllm serve`` whose publishing socket is already held by someone else.
"""

from __future__ import annotations

import concurrent.futures as cf
import socket
from pathlib import Path

import pytest
from test_attach import PROMPTS, Attacher, Server, _by_request, early, started

from specterm.engine import wire

pytestmark = pytest.mark.engine


class DpServers:
    """The module's two servers, started (not yet ready): by ``test_attach``'s fixture when both
    modules run, so they start beside its tests, else by this module's."""

    def __init__(self, smollm2: str, tmp: Path) -> None:
        self.tmp = tmp
        # A live listener on the second server's socket: the address is taken by "another server".
        self.held = socket.socket(socket.AF_UNIX)
        self.held.bind(str(tmp / "held.sock"))
        self.held.listen(1)
        self.dp = Server(smollm2, tmp, "dp", spec=True, extra=("--data-parallel-size", "2"), cores="0|1")
        self.blocked = Server(smollm2, tmp, "held", spec=True, plain_vllm=True)

    def stop(self) -> None:  # idempotent: the module's teardown, then the session's cleanup
        self.dp.stop()
        self.blocked.stop()
        self.held.close()


@pytest.fixture(scope="module")
def dp_servers(smollm2, tmp_path_factory):
    running = early.pop("dp", None) or DpServers(smollm2, tmp_path_factory.mktemp("dp"))
    try:
        yield running.dp.wait_ready(), running.blocked.wait_ready(), running.tmp
    finally:
        running.stop()
        for att in started:
            att.stop()


def test_one_attach_on_rank_0_finds_rank_1_sees_every_request_and_reconciles_each_rank(dp_servers):
    """Each rank publishes at its own address (rank 1 beside rank 0); one ``attach`` given rank 0's
    address finds rank 1 by itself, sees every request once with the rank that ran it, and reconciles
    each rank with its own counters (vLLM's ``engine`` label) in the server's /metrics."""
    dp, _blocked, tmp = dp_servers
    rank1 = wire.for_rank(f"ipc://{dp.sock}", 1).removeprefix("ipc://")
    assert dp.sock.exists() and Path(rank1).exists() and Path(rank1).name == "dp-dp1.sock"
    log = dp.log.read_text()
    assert "not published" not in log and "another server already publishes" not in log
    att = Attacher(dp, tmp, "ranks", "--max-requests", "4", "--metrics", f"{dp.url}/metrics")
    att.wait_for(lambda e: "found data-parallel rank 1 of r1" in e.get("message", ""), 30)
    att.wait_for(lambda e: e.get("message", "").startswith(f"connected to ipc://{rank1}"), 30)
    with cf.ThreadPoolExecutor(4) as pool:  # at once: vLLM's balancer spreads them over the ranks
        outs = [f.result(timeout=300) for f in [pool.submit(dp.chat, p, 24) for p in PROMPTS + PROMPTS[:1]]]
    texts = sorted(o.choices[0].message.content for o in outs)
    events = att.finish()
    assert att.proc.returncode == 0, att.err.read_text()
    finished = [r for r in _by_request(events).values() if "finished" in r]
    assert sorted(r["finished"]["text"] for r in finished) == texts  # every request once, none twice
    ranks = {r["started"]["replica"] for r in finished}
    assert ranks <= {"r1·0", "r1·1"}
    seen = {e["replica"]: e["dp_index"] for e in events if e["type"] == "replica"}
    assert seen == {"r1·0": 0, "r1·1": 1}
    counters = {e["replica"]: e for e in events if e["type"] == "engine_counters"}
    assert set(counters) == {"r1·0", "r1·1"} and all(c["matched"] for c in counters.values()), counters
    assert sum(c["ours"]["drafts"] for c in counters.values()) > 0


def test_a_rank_that_cannot_publish_warns_once_and_the_server_serves(dp_servers):
    _dp, blocked, _tmp = dp_servers
    out = blocked.chat(PROMPTS[2], 16)
    assert out.choices[0].message.content
    log = blocked.log.read_text()
    assert log.count("verdicts are not published") == 1, log[-3000:]
    assert "another server already publishes" in log
    assert blocked.proc.poll() is None
