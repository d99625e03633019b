"""The stream a publishing ``vllm serve`` sends to ``specterm attach``: where, who may read it, and what.

Terms (shared by ``engine/publish.py``, the server half, and ``session/attach.py``, the viewer half):

*publisher*
    ``PublishingScheduler`` inside vLLM's EngineCore process: it binds a ZeroMQ ``XPUB`` socket (pyzmq
    comes with vLLM) and sends one ``Batch`` per engine step that had a subscriber.
*address*
    ``ipc://`` a Unix socket (the default: ``default_socket_path()``, 0600 in a 0700 directory under
    the user's runtime dir, so only its owner can connect), or ``tcp://HOST:PORT`` when asked for, which
    then needs a token (``SPECTERM_PUBLISH_TOKEN``).
*topic*
    ZeroMQ's subscription prefix. The publisher runs the socket in manual mode and grants exactly one
    subscription, the topic: ``TOPIC`` on a Unix socket, the token over TCP. A subscriber that does not
    know the token is connected but receives nothing (ZeroMQ matches prefixes, so an empty subscription,
    which would match everything, is never granted).
*batch*
    What one engine step produced, for every request that ran in it: requests seen for the first time by
    the current subscribers (their prompt ids, once), one ``Rec`` per request that emitted tokens (the
    verdict hook's ``StepRecord`` plus the ids that reached the output), the requests that finished, and
    ``dropped``: batches the publisher could not send so far (a slow or stopped reader; never waited for).

The payload is msgpack (msgspec, already a dependency) and carries ``WIRE_VERSION``; a viewer refuses
another version in one line. Nothing here imports vLLM: the viewer runs without the engine extra.
"""

from __future__ import annotations

import os
import socket
import stat
import tempfile
from pathlib import Path

import msgspec

from specterm.errors import ConfigError

WIRE_VERSION = 1
TOPIC = b"specterm"
ENV_ADDR = "SPECTERM_PUBLISH"
"""Where the publisher binds: a socket path, ``ipc://PATH`` or ``tcp://HOST:PORT``; ``off`` disables it."""
OFF = ("off", "0", "none")
"""``SPECTERM_PUBLISH`` (or ``--publish``) values that turn publishing off."""
ENV_TOKEN = "SPECTERM_PUBLISH_TOKEN"
ENV_BUFFER = "SPECTERM_PUBLISH_BUFFER"
DEFAULT_BUFFER = 1000
"""Batches (engine steps) queued per subscriber before the publisher drops and counts."""
SCHEDULER_CLS = "specterm.engine.publish.PublishingScheduler"


class Hello(msgspec.Struct, tag="hello"):
    version: int
    model: str
    tokenizer: str
    spec: dict | None
    """``events.Speculation`` as a dict (method and k); ``None``: the server runs without speculation."""
    pid: int
    vllm: str = ""
    dp_index: int = 0
    """The data-parallel rank this scheduler runs (``publish.dp_index``): one publisher per rank."""
    instance: str = ""
    """Random per publisher: two addresses whose hellos carry the same one are the same publisher."""
    weight_bytes: dict | None = None
    """``{"target": n, "draft": m}`` as the session header records them (the bandwidth panel);
    ``None`` where the server's model files cannot be read (a hub id not in the local cache)."""


class ReqOpen(msgspec.Struct, tag="open"):
    id: str
    prompt: list[int]
    output: list[int]
    """Output ids the request had already produced when this subscriber first saw it (a late attach)."""
    arrival: float
    """``time.time()`` when vLLM received the request (its ``arrival_time``)."""
    cached: int | None
    max_tokens: int | None
    temperature: float | None
    structured: bool


class Rec(msgspec.Struct, array_like=True):
    id: str
    drafted: list[int]
    sampled: list[int]
    emitted: list[int]
    """What vLLM kept of ``sampled`` (its stop checks may cut the tail)."""
    invalid: int
    padding: int
    allowed: list[int] | None


class ReqDone(msgspec.Struct, array_like=True):
    id: str
    reason: str | None
    cached: int | None


class Batch(msgspec.Struct, tag="batch"):
    t: float
    """``time.time()`` on the server when the step's output was processed."""
    wall: float
    """Seconds from the scheduler's ``schedule()`` to this ``update_from_output``: the engine step."""
    dropped: int
    opened: list[ReqOpen] = []
    recs: list[Rec] = []
    done: list[ReqDone] = []
    batch_size: int | None = None
    """Requests scheduled in the step (``SpecStep.batch_size``); ``None``: an older publisher."""


class Bye(msgspec.Struct, tag="bye"):
    reason: str
    dropped: int = 0


Message = Hello | Batch | Bye
ENCODER = msgspec.msgpack.Encoder()
DECODER = msgspec.msgpack.Decoder(Message)


class VersionMismatch(ValueError):
    pass


def decode(payload: bytes) -> Message:
    """One message; ``VersionMismatch`` for a hello from another wire version."""
    try:
        msg = DECODER.decode(payload)
    except msgspec.ValidationError:
        try:  # an older or newer publisher: read just its version to say so
            version = msgspec.msgpack.decode(payload).get("version")
        except Exception:  # noqa: BLE001 - not even a map: garbage
            version = None
        if version is not None and version != WIRE_VERSION:
            raise VersionMismatch(version) from None
        raise
    if isinstance(msg, Hello) and msg.version != WIRE_VERSION:
        raise VersionMismatch(msg.version)
    return msg


def runtime_dir() -> Path:
    """``$XDG_RUNTIME_DIR/specterm`` (per-user, tmpfs, 0700 by spec), else ``<tmp>/specterm-<uid>``."""
    base = os.environ.get("XDG_RUNTIME_DIR")
    if base and Path(base).is_dir():
        return Path(base) / "specterm"
    return Path(tempfile.gettempdir()) / f"specterm-{os.getuid()}"


def default_socket_path() -> Path:
    return runtime_dir() / "vllm.sock"


def endpoint(addr: str | None) -> str:
    """A ZeroMQ endpoint from what a user types: a path, ``ipc://PATH`` or ``tcp://HOST:PORT``."""
    if not addr:
        return f"ipc://{default_socket_path()}"
    if addr.startswith(("ipc://", "tcp://")):
        return addr
    if "://" in addr:
        raise ValueError(f"unsupported address {addr!r}: use a socket path, ipc://PATH or tcp://HOST:PORT")
    return f"ipc://{Path(addr).expanduser().absolute()}"


def publishing_off(addr: str | None) -> bool:
    """Whether an address setting turns publishing off (``OFF``); unset means the default socket."""
    return (addr or "").strip().lower() in OFF


def user_endpoint(addr: str | None, what: str = "address") -> str:
    """``endpoint`` of an address a user gave (``what``: the flag, for the message), checked the whole
    way: a scheme other than these, or a ``tcp://`` without ``HOST:PORT``, is a one-line ``ConfigError``
    (``specterm attach`` and ``specterm vllm-serve --publish``; the publisher takes its environment as is)."""
    try:
        addr = endpoint(addr)
    except ValueError as err:
        raise ConfigError(str(err)) from None
    if addr.startswith("tcp://"):
        try:
            split_tcp(addr)
        except ValueError:
            raise ConfigError(f"bad {what} {addr!r}: expected tcp://HOST:PORT") from None
    return addr


def for_rank(addr: str, rank: int) -> str:
    """Data parallelism runs one EngineCore (one scheduler) per rank: rank r > 0 publishes beside rank 0,
    at ``NAME-dpR.sock`` or port + r."""
    if not rank:
        return addr
    if addr.startswith("tcp://"):
        host, port = split_tcp(addr)
        return f"tcp://{host}:{port + rank}"
    path = Path(addr.removeprefix("ipc://"))
    return f"ipc://{path.with_name(f'{path.stem}-dp{rank}{path.suffix}')}"


def topic_for(addr: str, token: str | None) -> bytes:
    return token.encode() if addr.startswith("tcp://") and token else TOPIC


def sidecar(path: Path) -> Path:
    """A JSON file beside the socket with the server's ``Hello``: a viewer knows the model, tokenizer
    and wire version before the first step (an idle server runs no scheduler code to send it)."""
    return path.with_name(path.name + ".json")


def private_dir(path: Path) -> None:
    """Create ``path`` 0700, or check that an existing one is ours and closed to others."""
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    st = path.stat()
    if st.st_uid != os.getuid():
        raise PermissionError(f"{path} belongs to another user (uid {st.st_uid}); refusing to publish there")
    if stat.S_IMODE(st.st_mode) & 0o077:
        os.chmod(path, 0o700)


def unix_listener(path: Path) -> bool:
    """Something accepts connections on this Unix socket (a stale file from a killed server does not)."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        try:
            s.connect(str(path))
        except OSError:
            return False
    return True


def tcp_listener(host: str, port: int, timeout: float = 1.0) -> bool:
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def split_tcp(addr: str) -> tuple[str, int]:
    host, _, port = addr.removeprefix("tcp://").rpartition(":")
    return host.strip("[]") or "127.0.0.1", int(port)
