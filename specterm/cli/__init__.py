"""Entry point ``specterm``. Each subcommand lives in its own module ``specterm/cli/<name>.py``
with a ``register(subparsers)`` function; heavy imports (vLLM, Textual) happen inside handlers so
``specterm --help`` and the commands that do not need them stay fast."""

from __future__ import annotations

import argparse
import importlib
import sys

from specterm import __version__
from specterm.errors import SpectermError

# Order is the order in --help.
COMMANDS = ("chat", "run", "replay", "attach", "vllm-serve", "serve", "bench", "compare", "doctor", "models", "agents")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="specterm", description="See what your speculative decoder is doing.")
    parser.add_argument("--version", action="version", version=f"specterm {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in COMMANDS:
        importlib.import_module(f"specterm.cli.{name.replace('-', '_')}").register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except SpectermError as err:
        print(f"specterm: error: {err}", file=sys.stderr)
        return err.exit_code
    except KeyboardInterrupt:
        print("specterm: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
