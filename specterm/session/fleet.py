"""``specterm attach ADDR [ADDR …]``: every scheduler of a fleet in one session.

Terms:

*target*
    what the user named: an address, with its token and ``/metrics`` URL (flags, or a fleet file).
*replica*
    one publisher, so one scheduler: a single-rank server, or one data-parallel rank of a server.
    vLLM runs one EngineCore per DP rank, and each publishes beside rank 0 (``wire.for_rank``). Its
    label is ``NAME·RANK``: the target's name (given, else r1, r2… in the order given) and the rank.

``Fleet`` reads every replica's socket on one thread (one ZeroMQ poller), each through its own
``Attach``; they share the clock, the conversations (a router may send an agent's next step to
another replica) and the request ids shown (a repeated one is shown as ``ID@REPLICA``). What it adds:

* **ranks found by themselves**: a probe thread looks, every ``PROBE_S``, for the next rank of each
  target (a socket file that accepts connections, or a listening port), so starting one ``attach``
  on rank 0's address follows the whole server, ranks that come up later included. The probe runs
  off the reading thread: a TCP probe of a remote host can take its timeout.
* **bad input goes on**: an address with nothing behind it is one line and is connected anyway
  (ZeroMQ reconnects by itself), so a replica that comes up later, or comes back, is picked up; the
  same address twice is followed once; two addresses whose hellos carry one ``instance`` are one
  publisher, reported once and followed once.

Nothing here imports Textual or vLLM.
"""

from __future__ import annotations

import queue
import threading
import tomllib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError, model_validator

from specterm.engine import wire
from specterm.engine.base import SessionClock
from specterm.errors import ConfigError
from specterm.events import Error, Sink
from specterm.session.attach import Attach, AttachError, check_address
from specterm.session.conversations import Conversations

PROBE_S = 1.0
"""Seconds between looks for a target's next data-parallel rank."""
MAX_RANKS = 64


@dataclass
class Target:
    addr: str
    """A ZeroMQ endpoint (``wire.user_endpoint``)."""
    token: str | None = None
    metrics: str | None = None
    name: str | None = None


@dataclass
class Replica:
    target: Target
    rank: int
    addr: str
    label: str
    attach: Attach
    socks: list[Any]


class _FleetEntry(BaseModel):
    model_config = ConfigDict(extra="forbid")
    addr: str
    name: str | None = None
    token: str | None = None
    token_env: str | None = None
    """The name of an environment variable holding the token (a secret kept out of the file)."""
    metrics: str | None = None

    @model_validator(mode="after")
    def _one_token(self) -> _FleetEntry:
        if self.token and self.token_env:
            raise ValueError("give token or token_env, not both")
        return self


class FleetFile(BaseModel):
    """A fleet file (TOML): one ``[[replica]]`` table per server, e.g.::

    [[replica]]
    name = "pod-a"
    addr = "tcp://10.0.0.5:5557"
    token_env = "POD_A_TOKEN"
    metrics = "http://10.0.0.5:8000/metrics"
    """

    model_config = ConfigDict(extra="forbid")
    replica: list[_FleetEntry]


def load_fleet_file(path: str | Path, environ: dict[str, str]) -> list[Target]:
    """The targets a fleet file names; a one-line ``ConfigError`` for any fault in it."""
    path = Path(path)
    try:
        data = tomllib.loads(path.read_text())
    except OSError as err:
        raise ConfigError(f"cannot read the fleet file {path}: {err.strerror or err}") from None
    except tomllib.TOMLDecodeError as err:
        raise ConfigError(f"{path} is not TOML: {err}") from None
    try:
        fleet = FleetFile.model_validate(data)
    except ValidationError as err:
        first = err.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise ConfigError(f"{path}: {where}: {first['msg']}") from None
    out = []
    for i, e in enumerate(fleet.replica, 1):
        token = e.token
        if e.token_env:
            token = environ.get(e.token_env)
            if not token:
                raise ConfigError(
                    f"{path}: replica {i} ({e.addr}) takes its token from ${e.token_env}, which is not set"
                )
        out.append(Target(wire.user_endpoint(e.addr, f"addr of replica {i}"), token, e.metrics, e.name))
    return out


def label_targets(targets: list[Target]) -> list[Target]:
    """Names for the unnamed (r1, r2… by position), and one line for a name given twice."""
    names = [t.name or f"r{i}" for i, t in enumerate(targets, 1)]
    for name in names:
        if names.count(name) > 1:
            raise ConfigError(f"two replicas are named {name!r}: each needs its own name")
    return [Target(t.addr, t.token, t.metrics, n) for t, n in zip(targets, names, strict=True)]


class Fleet:
    """Follows ``targets`` (and the DP ranks found beside them), emitting to ``sink`` until ``stop()``
    or until ``max_requests`` requests have finished in all."""

    def __init__(
        self,
        targets: list[Target],
        sink: Sink,
        *,
        tokenizer: str | None = None,
        clock: Callable[[], float] | None = None,
        max_requests: int | None = None,
        hellos: dict[str, wire.Hello | None] | None = None,
        notes: list[str] | None = None,
        probe: bool = True,
    ) -> None:
        """``hellos``: sidecar hellos already read (``check_address``), by address; ``notes``: lines
        to say first (``check_targets``: an address not up yet); ``probe``: look for DP ranks beside
        each target."""
        self.targets = label_targets(targets)
        self.sink = sink
        self.clock = clock or SessionClock()
        self.tokenizer = tokenizer
        self.max_requests = max_requests
        self.replicas: list[Replica] = []
        self.conversations = Conversations()
        self._shown_ids: set[str] = set()
        self._hellos = dict(hellos or {})
        self._instances: dict[str, Replica] = {}
        self._tokenizers: dict[str, Any] = {}
        self._found: queue.Queue[tuple[Target, int, str]] = queue.Queue()
        self._stop = threading.Event()
        self._probe = probe
        self._notes = list(notes or [])
        self._poller: Any = None
        self.addr = self.targets[0].addr if len(self.targets) == 1 else f"{len(self.targets)} servers"
        """What the header says is watched."""

    def stop(self) -> None:
        self._stop.set()
        for r in self.replicas:
            r.attach.stop()

    @property
    def finished(self) -> int:
        return sum(r.attach.finished for r in self.replicas)

    def _warn(self, message: str) -> None:
        self.sink(Error(t=self.clock(), level="warning", where="attach", message=message))

    # -- the reading thread -------------------------------------------------------------------------

    def run(self) -> None:
        import zmq

        self._poller = zmq.Poller()
        for note in self._notes:
            self._warn(note)
        for t in self.targets:
            self._add(t, 0, t.addr)
        prober = None
        if self._probe:
            prober = threading.Thread(target=self._probe_ranks, name="specterm-fleet-probe", daemon=True)
            prober.start()
        try:
            while not self._stop.is_set():
                while True:
                    try:
                        self._add(*self._found.get_nowait())
                    except queue.Empty:
                        break
                ready = dict(self._poller.poll(100))
                for r in list(self.replicas):
                    for sock in r.socks:
                        if sock in ready and not r.attach.stopped:
                            r.attach.on_ready(sock)
                    if r.attach.stopped and not self._stop.is_set():
                        self._drop(r)  # a duplicate of another replica's publisher
                if self.max_requests is not None and self.finished >= self.max_requests:
                    break
        finally:
            self._stop.set()
            for r in self.replicas:
                self._close(r)
            if prober is not None:
                prober.join(timeout=2 * PROBE_S)

    def _add(self, target: Target, rank: int, addr: str) -> None:
        if any(r.addr == addr for r in self.replicas):
            if rank == 0:
                self._warn(f"{addr} is given twice: followed once")
            return
        hello = self._hellos.get(addr)
        if addr not in self._hellos and rank:
            try:
                hello = check_address(addr)
            except AttachError:
                hello = None
        label = f"{target.name}·{rank}"
        attach = Attach(
            addr,
            self.sink,
            token=target.token,
            tokenizer=self.tokenizer,
            clock=self.clock,
            hello=hello,
            replica=label,
            conversations=self.conversations,
            shown_ids=self._shown_ids,
            claim=self._claim,
            tokenizers=self._tokenizers,
        )
        replica = Replica(target, rank, addr, label, attach, [])
        self.replicas.append(replica)
        if rank:
            self._warn(f"found data-parallel rank {rank} of {target.name} at {addr} ({label})")
        socks = attach.connect()
        if attach.stopped:  # its sidecar named a publisher already followed
            attach.close()
            self.replicas.remove(replica)
            return
        replica.socks = socks
        for sock in socks:
            self._poller.register(sock, 1)  # zmq.POLLIN

    def _claim(self, attach: Attach, hello: wire.Hello) -> bool:
        if not hello.instance:
            return True
        owner = self._instances.get(hello.instance)
        mine = next((r for r in self.replicas if r.attach is attach), None)
        if owner is None or owner is mine:
            if mine is not None:
                self._instances[hello.instance] = mine
            return True
        self._warn(
            f"{attach.addr} is the same publisher as {owner.addr} ({owner.label}, pid {hello.pid}): followed once"
        )
        return False

    def _drop(self, r: Replica) -> None:
        self._close(r)
        self.replicas.remove(r)

    def _close(self, r: Replica) -> None:
        for sock in r.socks:
            try:
                self._poller.unregister(sock)
            except KeyError:
                pass
        r.attach.close()
        r.socks = []

    # -- the probe thread ---------------------------------------------------------------------------

    def _probe_ranks(self) -> None:
        """Looks for rank n + 1 of each target beside the n it has; hands finds to the reading thread."""
        known = {t.addr: 0 for t in self.targets}
        first = True  # the first look at once: a server's ranks are followed from its first request
        while first or not self._stop.wait(PROBE_S):
            first = False
            for t in self.targets:
                rank = known[t.addr] + 1
                if rank >= MAX_RANKS:
                    continue
                addr = wire.for_rank(t.addr, rank)
                if listening(addr):
                    known[t.addr] = rank
                    self._found.put((t, rank, addr))

    # -- reconciliation -----------------------------------------------------------------------------

    def reconcile(self, before: dict[str, dict[int, dict[str, int]]], scrape: Callable[[str], Any]) -> list[Any]:
        """One ``EngineCounters`` per replica whose target has a ``/metrics`` URL: our totals against
        the deltas of its own counters (its DP rank's ``engine`` label), since ``before``
        (``scrape_all``), or since it restarted. ``scrape(url)``: that URL's counters by engine."""
        from specterm.events import EngineCounters

        after = scrape_all(list(before), scrape)
        out = []
        for r in self.replicas:
            url = r.target.metrics
            if url is None or url not in before or isinstance(before[url], str):
                continue  # no URL, or unreadable when the attach began (said then)
            ours = r.attach.totals_since_restart()  # all of them without a restart
            if isinstance(after[url], str):
                out.append(
                    EngineCounters(
                        t=self.clock(),
                        request_id="all",
                        ours=ours,
                        vllm={},
                        matched=False,
                        detail=after[url],
                        replica=r.label,
                    )
                )
                continue
            engine = r.attach.hello.dp_index if r.attach.hello else r.rank
            restarted = r.attach.base is not None
            # a restarted server's counters start from 0 with its new process
            then = {} if restarted else before[url].get(engine, {})
            now = after[url].get(engine, {})
            theirs = {k: now.get(k, 0) - then.get(k, 0) for k in ours}
            ok = ours == theirs
            detail = "" if ok else "requests that ran before or after the attach count there too"
            if restarted:
                detail = "since its restart" + ("" if ok else f"; {detail}")
            out.append(
                EngineCounters(
                    t=self.clock(), request_id="all", ours=ours, vllm=theirs, matched=ok, detail=detail, replica=r.label
                )
            )
        return out


def scrape_all(urls: list[str], scrape: Callable[[str], Any]) -> dict[str, Any]:
    """``scrape(url)`` of each URL once; a URL that cannot be read gives the one-line reason instead
    (a replica that is down: the others are reconciled all the same)."""
    out: dict[str, Any] = {}
    for url in dict.fromkeys(urls):
        try:
            out[url] = scrape(url)
        except (OSError, ValueError) as err:  # URLError is an OSError; a page that is not metrics, ValueError
            out[url] = f"cannot read {url}: {getattr(err, 'reason', None) or err}"
    return out


def listening(addr: str) -> bool:
    """Something accepts connections at a ZeroMQ address (a publisher, most likely: ``wire`` checks)."""
    if addr.startswith("tcp://"):
        host, port = wire.split_tcp(addr)
        return wire.tcp_listener(host, port, timeout=0.5)
    path = Path(addr.removeprefix("ipc://"))
    return path.exists() and wire.unix_listener(path)
