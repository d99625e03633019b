"""``specterm serve``: the ``chat`` dashboard in a web browser, through textual-serve.

Open the printed URL instead of SSH-ing into a terminal. textual-serve runs one ``specterm chat``
process per browser connection, so each tab starts (and holds) its own engine — with a real
pair that is its own memory and start-up time; close tabs you do not use. Every ``chat`` flag
(engine, agent, theme, ``--replay``) is passed on to the served command and checked once here
before anything listens. Each tab records its own session under the data dir (``--no-record`` to
turn that off). The server listens on ``--host``/``--port`` (default localhost:8000, reachable
through ``ssh -L 8000:localhost:8000 HOST``); behind a tunnel or proxy on another address, pass
``--public-url`` so the page's websocket finds its way back. Ctrl+C quits every tab's app (each closes
its engine and recording) and then the server; a tab whose engine is still starting is waited for.
"""

from __future__ import annotations

import argparse
import errno
import os
import shlex
import socket
import sys

from specterm.errors import ConfigError

DEFAULT_HOST = "localhost"
DEFAULT_PORT = 8000


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "serve",
        help="serve the chat dashboard to a web browser (one engine per tab)",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    g = p.add_argument_group("server")
    g.add_argument(
        "--host",
        default=DEFAULT_HOST,
        help=f"address to listen on (default {DEFAULT_HOST}; 0.0.0.0 for every interface)",
    )
    g.add_argument("--port", type=int, default=DEFAULT_PORT, help=f"port to listen on (default {DEFAULT_PORT})")
    g.add_argument(
        "--public-url",
        metavar="URL",
        help="the URL browsers use to reach this server, when it differs from http://HOST:PORT "
        "(a tunnel to another local port, a reverse proxy)",
    )
    from specterm.cli.chat import add_chat_args

    add_chat_args(p)
    p.set_defaults(func=handle)


def chat_command(args: argparse.Namespace) -> str:
    """The shell command textual-serve runs per tab: this Python's ``specterm chat`` with every chat
    flag the user gave (defaults left out, so the child resolves them the same way).

    The tab's app ignores SIGINT (``trap '' INT`` is inherited through ``exec``): Ctrl+C in the
    server's terminal reaches the whole process group, and a KeyboardInterrupt landing anywhere in
    an app (mid-step, mid-recording) would end it with a traceback; the server quits each app
    through textual-serve instead (``on_shutdown``)."""
    from specterm.cli.chat import add_chat_args

    chat = argparse.ArgumentParser(add_help=False)
    add_chat_args(chat)
    argv: list[str] = []
    for action in chat._actions:
        value = getattr(args, action.dest, None)
        if value == action.default or value is None:
            continue
        flag = action.option_strings[-1]
        if isinstance(action, argparse._StoreTrueAction):
            argv.append(flag)
        elif isinstance(action, argparse._AppendAction):
            for item in value:
                argv += [flag, str(item)]
        else:
            argv += [flag, str(value)]
    return "trap '' INT; exec " + shlex.join([sys.executable, "-m", "specterm", "chat", *argv])


def check_port_free(host: str, port: int) -> None:
    """Bind and release every address ``host`` resolves to, the way aiohttp (asyncio's
    ``create_server``) will bind them, so a port in use or a bad host is one line before anything
    listens rather than a traceback from inside the web server."""
    if not 0 < port < 65536:
        raise ConfigError(f"bad --port {port}: a port is 1..65535")
    try:
        addresses = socket.getaddrinfo(host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as err:
        raise ConfigError(f"bad --host {host}: {err.strerror}") from None
    for family, kind, proto, _, address in addresses:
        with socket.socket(family, kind, proto) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as asyncio does
            if family == socket.AF_INET6:
                probe.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            try:
                probe.bind(address)
            except OSError as err:
                if err.errno == errno.EADDRNOTAVAIL:
                    continue  # a family this machine has not enabled: asyncio skips it too
                if err.errno == errno.EADDRINUSE:
                    raise ConfigError(
                        f"port {port} on {host} is in use ({os.strerror(err.errno)}); pass --port with a free one"
                    ) from None
                raise ConfigError(f"cannot listen on {host}:{port}: {os.strerror(err.errno)}") from None


def public_url(host: str, port: int, given: str | None) -> str:
    if given:
        return given.rstrip("/")
    if host in ("0.0.0.0", "::", ""):  # a wildcard address is not one a browser can open
        host = socket.gethostname()
    return f"http://{host}:{port}"


def handle(args: argparse.Namespace) -> int:
    from pathlib import Path

    if args.record:
        raise ConfigError(
            "--record names one file, but each browser tab records its own session; "
            "leave it off (a new file per tab under the data dir) or pass --no-record"
        )
    if args.replay:
        if not Path(args.replay).is_file():
            raise ConfigError(f"--replay: no such file: {args.replay}")
    else:
        from specterm.cli.chat import check_live_args

        check_live_args(args)  # bad flags fail here, once; the default pair is built before any tab
    check_port_free(args.host, args.port)
    try:
        from textual_serve.server import Server
    except ImportError:
        raise ConfigError("specterm serve needs textual-serve: pip install textual-serve") from None

    url = public_url(args.host, args.port, args.public_url)

    class SpectermServer(Server):
        """textual-serve's server with our banner, and a Ctrl+C that quits every tab's app at once."""

        def __init__(self, *a, **kw) -> None:
            super().__init__(*a, **kw)
            self.sessions: set = set()  # the tasks serving each connected tab

        async def on_startup(self, app) -> None:  # our one line instead of textual-serve's logo
            print(
                f"specterm: serving the dashboard on {url} (each browser tab starts its own engine); Ctrl+C stops",
                flush=True,
            )

        async def handle_websocket(self, request):
            import asyncio

            task = asyncio.current_task()
            self.sessions.add(task)
            try:
                return await super().handle_websocket(request)
            finally:
                self.sessions.discard(task)

        async def on_shutdown(self, app) -> None:
            # aiohttp would wait 60 s for open tabs before cancelling them; cancelling now sends each
            # app textual-serve's "quit" at once, so it closes its engine and its recording itself.
            for task in list(self.sessions):
                task.cancel()

    server = SpectermServer(chat_command(args), host=args.host, port=args.port, title="specterm", public_url=url)
    try:
        server.serve()
    except OSError as err:  # lost the port between the check and the bind
        raise ConfigError(f"cannot listen on {args.host}:{args.port}: {err.strerror or err}") from None
    return 0
