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
import time
from pathlib import Path

import pytest
from test_attach import PROMPTS, Attacher, Server, _by_request, started

from specterm.engine import wire

pytestmark = pytest.mark.engine


@pytest.fixture(scope="module")
def dp_servers(smollm2, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("dp")
    # A live listener on the second server's socket: the address is taken by "another server".
    held = socket.socket(socket.AF_UNIX)
    held.bind(str(tmp / "held.sock"))
    held.listen(1)
    dp = Server(smollm2, tmp, "dp", spec=True, extra=("--data-parallel-size", "2"))
    blocked = Server(smollm2, tmp, "held", spec=True, plain_vllm=True)
    try:
        yield dp.wait_ready(), blocked.wait_ready(), tmp
    finally:
        dp.stop()
        blocked.stop()
        held.close()
        for att in started:
            att.stop()


class _Rank:
    """What ``Attacher`` needs of a server: the socket it attaches to."""

    def __init__(self, sock) -> None:
        self.sock = sock


def test_each_rank_publishes_at_its_own_address_and_every_request_is_seen(dp_servers):
    dp, _blocked, tmp = dp_servers
    rank1 = wire.for_rank(f"ipc://{dp.sock}", 1).removeprefix("ipc://")
    assert dp.sock.exists() and Path(rank1).exists() and Path(rank1).name == "dp-dp1.sock"
    log = dp.log.read_text()
    assert "not published" not in log and "another server already publishes" not in log
    views = [Attacher(_Rank(dp.sock), tmp, "rank0"), Attacher(_Rank(rank1), tmp, "rank1")]
    with cf.ThreadPoolExecutor(4) as pool:  # at once: vLLM's balancer spreads them over the ranks
        outs = [f.result(timeout=300) for f in [pool.submit(dp.chat, p, 24) for p in PROMPTS + PROMPTS[:1]]]
    texts = sorted(o.choices[0].message.content for o in outs)

    def seen() -> list[str]:
        return [r["finished"]["text"] for att in views for r in _by_request(att.events()).values() if "finished" in r]

    deadline = time.monotonic() + 60  # a client has its answer a moment before attach prints the end
    while len(seen()) < len(texts) and time.monotonic() < deadline:
        time.sleep(0.2)
    for att in views:
        att.stop()
    assert sorted(seen()) == texts  # every request on exactly one rank's stream, none twice


def test_a_rank_that_cannot_publish_warns_once_and_the_server_serves(dp_servers):
    _dp, blocked, _tmp = dp_servers
    out = blocked.chat(PROMPTS[2], 16)
    assert out.choices[0].message.content
    log = blocked.log.read_text()
    assert log.count("verdicts are not published") == 1, log[-3000:]
    assert "another server already publishes" in log
    assert blocked.proc.poll() is None
