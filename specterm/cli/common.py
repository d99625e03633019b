"""Flags shared by the commands that start an engine (run, chat, bench)."""

from __future__ import annotations

import argparse
import platform
import socket

from specterm import __version__
from specterm.config import PRESETS, resolve_engine_config
from specterm.engine.base import EngineConfig
from specterm.events import SessionStarted


def add_engine_args(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("engine")
    g.add_argument("--target", help="target model: local directory or hub id (default: the built-in tiny pair)")
    g.add_argument("--draft", help="draft model for --method draft_model/eagle/eagle3")
    g.add_argument("--method", choices=["draft_model", "ngram", "eagle", "eagle3", "suffix"],
                   help="speculation method (default draft_model)")
    g.add_argument("-k", "--num-speculative-tokens", dest="num_speculative_tokens", type=int,
                   help="draft tokens per step, 1..16 (default 4)")
    g.add_argument("--no-spec", action="store_true", help="target-only: speculation off, same code path")
    g.add_argument("--preset", choices=sorted(PRESETS), help="a real model pair by hub id")
    g.add_argument("--dtype", help="model dtype (default float32: lossless checks need it)")
    g.add_argument("--max-model-len", type=int)
    g.add_argument("--tensor-parallel-size", type=int)
    g.add_argument("--pipeline-parallel-size", type=int)


def engine_config_from_args(args: argparse.Namespace) -> EngineConfig:
    """Defaults → preset → config file → env → flags. Builds the default tiny pair if needed."""
    flags = {name: getattr(args, name, None) for name in (
        "target", "draft", "method", "num_speculative_tokens", "dtype", "max_model_len",
        "tensor_parallel_size", "pipeline_parallel_size")}
    defaults = None
    if args.target is None and args.preset is None:
        from specterm.engine.models import default_model_paths

        target, draft = default_model_paths()
        defaults = (str(target), str(draft))
    config = resolve_engine_config(flags, preset=args.preset, default_models=defaults)
    if defaults and config.target == defaults[0]:
        from specterm.engine.models import ensure_default_models

        ensure_default_models()
    if args.no_spec:
        config = config.model_copy(update={"method": None})
    return config


def session_header(config: EngineConfig, *, agent: str | None = None, extra: dict | None = None) -> SessionStarted:
    return SessionStarted(
        specterm_version=__version__,
        config=config.model_dump() | (extra or {}),
        models=config.models_summary(),
        agent=agent,
        host=f"{socket.gethostname()} ({platform.system()} {platform.machine()}, Python {platform.python_version()})",
    )
