"""Flags shared by the commands that start an engine (run, chat, bench, compare)."""

from __future__ import annotations

import argparse
import platform
import socket
from pathlib import Path
from typing import TYPE_CHECKING, get_args

from specterm import __version__
from specterm.cli.progress import build_progress
from specterm.config import LOCAL_PRESETS, PRESETS, resolve_engine_config
from specterm.engine.base import SUFFIX_KNOBS, EngineConfig, ExecutorBackend, GenerationParams, Method
from specterm.events import SessionStarted
from specterm.paths import DATA_DIR_ENV

if TYPE_CHECKING:
    from specterm.session.recorder import Recorder


def _default(field: str):
    """``EngineConfig``'s default for ``field``: help texts state it, the model owns it."""
    return EngineConfig.model_fields[field].default


def field_bounds(field: str) -> tuple[float, float]:
    """``EngineConfig``'s (ge, le) bounds for ``field``: help texts and list flags (``bench --k``)
    state and check them, the model's ``Field`` owns them."""
    meta = EngineConfig.model_fields[field].metadata
    return next(m.ge for m in meta if hasattr(m, "ge")), next(m.le for m in meta if hasattr(m, "le"))


def add_engine_args(p: argparse.ArgumentParser, *, method_and_k: bool = True) -> None:
    """The engine's flags. ``method_and_k=False`` leaves out ``--method`` and ``-k``: ``bench`` sweeps
    lists of both with flags of its own, and one flag per thing keeps its help true."""
    g = p.add_argument_group("engine")
    g.add_argument(
        "--target",
        help="target model: local directory or hub id (default: the smollm2-agent "
        "pair; `specterm models info` says which pair a run uses and why)",
    )
    g.add_argument("--draft", help="draft model for --method draft_model/eagle/eagle3")
    if method_and_k:
        lo, hi = field_bounds("num_speculative_tokens")
        g.add_argument("--method", choices=get_args(Method), help=f"speculation method (default {_default('method')})")
        g.add_argument(
            "-k",
            "--num-speculative-tokens",
            dest="num_speculative_tokens",
            type=int,
            help=f"draft tokens per step, {lo}..{hi} (default {_default('num_speculative_tokens')})",
        )
    g.add_argument(
        "--grammar-drafting",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="draft under each structured request's grammar: masked drafts, and runs the grammar "
        "forces proposed without draft passes (--method draft_model; docs/grammar-drafting.md)",
    )
    g.add_argument(
        "--spec-schedule",
        metavar="JSON_OR_FILE",
        help="k per batch size, vLLM's num_speculative_tokens_per_batch_size: inclusive "
        "[[first, last, k], ...] ranges of requests per step, e.g. '[[1,1,4],[2,2,2],[3,256,0]]' "
        "(k = 0: off; each k <= -k); written by bench --concurrency --recommend",
    )
    g.add_argument("--no-spec", action="store_true", help="target-only: speculation off, same code path")
    g.add_argument(
        "--preset",
        choices=sorted([*PRESETS, *LOCAL_PRESETS]),
        help="a real model pair by hub id; or a local pair: smollm2-agent (SmolLM2-135M-Instruct "
        "fine-tuned for the agents with a tiny draft, the default) or embedded (the "
        "4.5M-parameter pair shipped with specterm: small and fast)",
    )
    g.add_argument("--dtype", help="model dtype (default float32: lossless checks need it)")
    g.add_argument("--max-model-len", type=int)
    g.add_argument("--tensor-parallel-size", type=int)
    g.add_argument("--pipeline-parallel-size", type=int)
    g.add_argument(
        "--distributed-executor-backend",
        choices=get_args(ExecutorBackend),
        help="vLLM's executor for TP/PP workers: mp (one machine), ray (a Ray cluster; "
        "see README 'Scale-out'); default: vLLM's choice",
    )
    g.add_argument(
        "--chat-template", metavar="FILE", help="a Jinja chat template to use instead of the target tokenizer's own"
    )
    s = p.add_argument_group("suffix decoding (--method suffix; vLLM's knobs, its defaults)")
    s.add_argument(
        "--suffix-decoding-max-tree-depth",
        type=int,
        metavar="N",
        help=f"depth of the global and per-prompt suffix trees (default {_default('suffix_decoding_max_tree_depth')})",
    )
    s.add_argument(
        "--suffix-decoding-max-cached-requests",
        type=int,
        metavar="N",
        help=f"past responses kept in the global tree; 0: per-prompt trees only (default {_default('suffix_decoding_max_cached_requests')})",
    )
    s.add_argument(
        "--suffix-decoding-max-spec-factor",
        type=float,
        metavar="X",
        help=f"draft at most X × the matched suffix length tokens (default {_default('suffix_decoding_max_spec_factor')})",
    )
    s.add_argument(
        "--suffix-decoding-min-token-prob",
        type=float,
        metavar="P",
        help=f"draft only tokens whose estimated probability is at least P (default {_default('suffix_decoding_min_token_prob')})",
    )


def add_generation_args(p: argparse.ArgumentParser, *, max_tokens: int | None = None, why: str | None = None) -> None:
    """``--max-tokens`` and ``--temperature``, every command's, with ``GenerationParams``' defaults.

    A command whose own ``--max-tokens`` default has a reason passes it as ``max_tokens`` with
    ``why``, which its help text states."""
    fields = GenerationParams.model_fields
    if max_tokens is None:
        max_tokens = fields["max_tokens"].default
    elif why is None:
        raise ValueError("a --max-tokens default of a command's own needs its reason (why=)")
    reason = f": {why}" if why else ""
    temperature = fields["temperature"].default
    p.add_argument(
        "--max-tokens",
        type=int,
        default=max_tokens,
        help=f"most tokens to generate per request (default {max_tokens}{reason})",
    )
    p.add_argument(
        "--temperature",
        type=float,
        default=temperature,
        help=f"sampling temperature, 0..5 (default {temperature:g}: greedy)",
    )


def engine_config_from_args(args: argparse.Namespace) -> EngineConfig:
    """Defaults → preset → config file → env → flags. Builds the default pair if needed."""
    flags = {
        name: getattr(args, name, None)
        for name in (
            "target",
            "draft",
            "method",
            "num_speculative_tokens",
            "dtype",
            "max_model_len",
            "tensor_parallel_size",
            "pipeline_parallel_size",
            "distributed_executor_backend",
            "chat_template",
            "grammar_drafting",
            "spec_schedule",
            *SUFFIX_KNOBS,
        )
    }
    defaults = None
    if args.target is None and args.preset is None:
        from specterm.models.defaults import default_model_paths

        target, draft = default_model_paths()
        defaults = (str(target), str(draft))
    preset_values = None
    if args.preset in LOCAL_PRESETS:
        target, draft = build_local_pair(args.preset)
        preset_values = {"target": str(target), "draft": str(draft), "method": "draft_model"}
    config = resolve_engine_config(flags, preset=args.preset, default_models=defaults, preset_values=preset_values)
    if defaults and config.target == defaults[0]:
        from specterm.models.defaults import ensure_default_pair

        with build_progress() as log:
            pair = ensure_default_pair(log=log)
        if (str(pair.target), str(pair.draft)) != defaults:  # fell back to the small pair
            defaults = (str(pair.target), str(pair.draft))
            config = resolve_engine_config(flags, preset=None, default_models=defaults)
    if args.no_spec:  # target-only: no k, so no k per batch size either
        config = config.model_copy(update={"method": None, "spec_schedule": None})
    return config


def build_local_pair(name: str):
    """(target, draft) of a ``LOCAL_PRESETS`` pair, built if needed (with a progress bar)."""
    if name == "embedded":
        from specterm.models.defaults import ensure_small_models

        return ensure_small_models()
    from specterm.models.smollm2_agent import ensure_smollm2_agent

    with build_progress() as log:
        return ensure_smollm2_agent(log=log)


def session_header(config: EngineConfig, *, agent: str | None = None, extra: dict | None = None) -> SessionStarted:
    """The session's first event. Carries ``bench --recommend``'s recommendation when it was measured
    on exactly this configuration, so the dashboard (live or replayed) shows its expected speed-up."""
    from specterm.bench.recommend import for_engine

    if (rec := for_engine(config)) is not None:
        extra = (extra or {}) | {"recommendation": rec.model_dump()}
    recorded = config.as_recorded()
    return SessionStarted(
        specterm_version=__version__,
        config=recorded.model_dump() | (extra or {}),
        models=recorded.models_summary() | model_weights(config),
        agent=agent,
        host=f"{socket.gethostname()} ({platform.system()} {platform.machine()}, Python {platform.python_version()})",
    )


def model_weights(config: EngineConfig) -> dict:
    """``{"weight_bytes": {"target": n, "draft": m}}`` for the header (the bandwidth panel), from the
    local models' safetensors headers; empty when the target's cannot be read here (a hub id)."""
    from specterm.engine.base import NEEDS_DRAFT_MODEL
    from specterm.engine.weights import weight_bytes

    target = weight_bytes(config.target, config.dtype)
    if target is None:
        return {}
    draft = weight_bytes(config.draft, config.dtype) if config.method in NEEDS_DRAFT_MODEL else 0
    return {"weight_bytes": {"target": target, "draft": draft}}


def target_renderer(config: EngineConfig):
    """The target's ``PromptRenderer`` without loading an engine; ``None`` for a hub id (the
    engine renders those itself) or without the engine extra (loading it says which to install)."""
    from specterm.engine.chat import PromptRenderer
    from specterm.engine.checks import looks_like_hub_id
    from specterm.engine.installs import vllm_build
    from specterm.engine.vllm_engine import validate_config

    if vllm_build() is None:
        return None
    validate_config(config)
    if looks_like_hub_id(config.target):
        return None
    from transformers import AutoTokenizer

    return PromptRenderer(
        AutoTokenizer.from_pretrained(config.target),
        template_file=config.chat_template,
        model=f"the target model ({config.target})",
    )


def preflight(config: EngineConfig, prompt) -> None:
    """Render and size ``prompt`` with the target's tokenizer before any engine loads, so a
    template that refuses or a prompt longer than the context is one line in a second, not after
    the engine start. Hub ids are checked by the engine itself when it renders."""
    from specterm.engine.chat import check_fits
    from specterm.engine.vllm_engine import default_max_model_len

    renderer = target_renderer(config)
    if renderer is None:
        return
    limit = config.max_model_len or default_max_model_len(config.target)
    ids = renderer.ids(prompt)
    if limit:
        check_fits(len(ids), limit)


def generation_params(**fields):
    """``GenerationParams`` from flag values; a bad one is ``bad --flag: why`` (one line)."""
    from pydantic import ValidationError

    from specterm.engine.base import GenerationParams
    from specterm.errors import ConfigError, first_error

    try:
        return GenerationParams(**fields)
    except ValidationError as err:
        loc, msg = first_error(err)
        raise ConfigError(f"bad --{str(loc[0]).replace('_', '-')}: {msg}") from None


# -- recording flags (run, chat, compare, attach) -----------------------------------------------------


def add_record_args(parser: argparse.ArgumentParser) -> None:
    """Add ``--record PATH`` and ``--no-record`` (mutually exclusive). Recording is on by default."""
    group = parser.add_mutually_exclusive_group()
    group.add_argument(
        "--record",
        metavar="PATH",
        default=None,
        help=f"write the session to PATH (default: a new file under the data dir's sessions/; ${DATA_DIR_ENV} overrides the dir)",
    )
    group.add_argument("--no-record", action="store_true", default=False, help="do not record this session")


def recorder_from_args(args: argparse.Namespace, header: SessionStarted) -> Recorder | None:
    """The recorder the flags ask for: ``None`` with ``--no-record``, else a new file at ``--record``
    or at ``default_session_path()``. Raises ``SessionFileError`` if it cannot be created."""
    if getattr(args, "no_record", False):
        return None
    path = getattr(args, "record", None)
    from specterm.session.recorder import Recorder, default_session_path

    return Recorder(Path(path).expanduser() if path else default_session_path(), header)
