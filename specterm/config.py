"""Configuration: TOML file → environment (``SPECTERM_*``) → CLI flags, later wins.

The file is ``$SPECTERM_CONFIG`` or ``<user config dir>/specterm/config.toml``; its ``[engine]``
table holds ``EngineConfig`` fields, e.g.::

    [engine]
    target = "Qwen/Qwen2.5-7B-Instruct"
    draft = "Qwen/Qwen2.5-0.5B-Instruct"
    method = "draft_model"
    num_speculative_tokens = 4
    dtype = "bfloat16"

Environment variables name the same fields: ``SPECTERM_TARGET``, ``SPECTERM_DRAFT``,
``SPECTERM_METHOD``, ``SPECTERM_NUM_SPECULATIVE_TOKENS`` ... Every error is one line naming the
source (file, variable or flag) and the field.

Reading the file and the environment is pydantic-settings' job (``TomlConfigSettingsSource``,
``EnvSettingsSource`` over ``EngineSettings``: every ``EngineConfig`` field, optional, untyped).
The layers are merged here rather than by ``BaseSettings`` itself because an error must name the
layer a bad value came from, which a merged settings object no longer knows; ``EngineConfig``
validates the result once.
"""

from __future__ import annotations

import os
import tomllib
from pathlib import Path
from typing import Any, NamedTuple

from pydantic import ValidationError, create_model
from pydantic_settings import BaseSettings, EnvSettingsSource, SettingsConfigDict, TomlConfigSettingsSource

from specterm.diagnose.thresholds import Thresholds
from specterm.engine.base import EngineConfig
from specterm.errors import ConfigError, first_error
from specterm.paths import CONFIG_ENV, config_file

ENV_PREFIX = "SPECTERM_"

# Real pairs by hub id: plain config, loaded by vLLM as usual (need a hub or a local cache).
# Sized to fit the hardware they name (PRESET_NEEDS): the 70B target's bf16 weights alone are ≈ 141 GB,
# more than one 141 GB H200 holds next to a KV cache, so it is tensor-parallel over 2 GPUs (≈ 68 GiB each).
PRESETS: dict[str, dict[str, Any]] = {
    "llama-3.3-70b": {
        "target": "meta-llama/Llama-3.3-70B-Instruct",
        "draft": "meta-llama/Llama-3.2-1B-Instruct",
        "method": "draft_model",
        "num_speculative_tokens": 4,
        "dtype": "bfloat16",
        "tensor_parallel_size": 2,
    },
    "qwen2.5-7b": {
        "target": "Qwen/Qwen2.5-7B-Instruct",
        "draft": "Qwen/Qwen2.5-0.5B-Instruct",
        "method": "draft_model",
        "num_speculative_tokens": 4,
        "dtype": "bfloat16",
    },
}


# Pairs built on this machine on first use (the CLI builds them and passes their paths in).
LOCAL_PRESETS: dict[str, str] = {
    "smollm2-agent": "SmolLM2-135M-Instruct fine-tuned for the agents + a tiny draft (package index + shipped LoRA adapter)",
    "embedded": "the 4.5M-parameter pair shipped with specterm, trained from scratch on the agents' templates",
}


class PresetNeeds(NamedTuple):
    """What a preset's pair needs: parameters (billions) and the GPUs it is sized for."""

    target_b: float
    draft_b: float
    gpus: int
    gpu_gib: int

    def weights_per_gpu_gib(self, tensor_parallel_size: int) -> float:
        """bf16 weights per GPU: the target sharded over the TP group, the draft whole on each."""
        return 2e9 * (self.target_b / tensor_parallel_size + self.draft_b) / 2**30


PRESET_NEEDS: dict[str, PresetNeeds] = {
    # ≈ 68 GiB of weights per GPU: 2 × H200 (141 GB = 131 GiB); on 80 GB GPUs use TP = 4 (-tp 4).
    "llama-3.3-70b": PresetNeeds(70.6, 1.2, gpus=2, gpu_gib=131),
    "qwen2.5-7b": PresetNeeds(7.6, 0.5, gpus=1, gpu_gib=24),  # ≈ 15 GiB
}


class _SettingsBase(BaseSettings):
    model_config = SettingsConfigDict(env_prefix=ENV_PREFIX, extra="ignore")


EngineSettings = create_model(
    "EngineSettings",
    __base__=_SettingsBase,
    **{name: (Any | None, None) for name in EngineConfig.model_fields},  # type: ignore[call-overload]
)
"""The names pydantic-settings looks for: ``EngineConfig``'s fields (``SPECTERM_<FIELD>`` in the
environment); values stay raw here and are validated by ``EngineConfig``."""


def _from_file(path: Path) -> dict[str, Any]:
    if not path.exists():
        if os.environ.get(CONFIG_ENV):
            raise ConfigError(f"config file {path} (from SPECTERM_CONFIG) does not exist")
        return {}
    try:
        data = TomlConfigSettingsSource(EngineSettings, toml_file=path)()
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as err:
        raise ConfigError(f"config file {path} is not valid TOML: {err}") from None
    engine = data.get("engine", {})
    if not isinstance(engine, dict):
        raise ConfigError(f"config file {path}: [engine] must be a table")
    return _no_method(engine)


def _no_method(values: dict[str, Any]) -> dict[str, Any]:
    """``method = "none"`` (TOML and the environment have no null) is target-only."""
    if isinstance(values.get("method"), str) and values["method"].lower() in ("none", ""):
        values["method"] = None
    return values


def _from_env() -> dict[str, Any]:
    return _no_method(EnvSettingsSource(EngineSettings)())


def _validate(merged: dict[str, Any], sources: dict[str, str]) -> EngineConfig:
    try:
        return EngineConfig(**merged)
    except ValidationError as err:
        loc, msg = first_error(err)
        field = ".".join(str(p) for p in loc) or "(config)"
        where = sources.get(field, "config")
        raise ConfigError(f"bad {field} (from {where}): {msg}") from None


def resolve_engine_config(
    flags: dict[str, Any],
    *,
    preset: str | None = None,
    default_models: tuple[str, str] | None = None,
    preset_values: dict[str, Any] | None = None,
) -> EngineConfig:
    """Merge defaults, preset, file, environment and flags (``None`` flag values are unset).
    A ``LOCAL_PRESETS`` name comes with ``preset_values`` (its built paths)."""
    merged: dict[str, Any] = {}
    sources: dict[str, str] = {}

    def layer(values: dict[str, Any], where: str) -> None:
        for key, value in values.items():
            merged[key] = value
            sources[key] = where

    if default_models:
        layer({"target": default_models[0], "draft": default_models[1]}, "defaults")
    if preset:
        if preset not in PRESETS and preset_values is None:
            raise ConfigError(f"unknown preset {preset!r}; known: {', '.join(sorted(PRESETS))}")
        layer(PRESETS.get(preset, preset_values or {}), f"preset {preset}")
    path = config_file()
    layer(_from_file(path), str(path))
    layer(_from_env(), "environment")
    layer({k: v for k, v in flags.items() if v is not None}, "command line")
    if "target" not in merged:
        raise ConfigError("no target model: pass --target PATH or set it in the config file")
    return _validate(merged, sources)


def load_thresholds() -> Thresholds:
    """The detectors' thresholds: the config file's ``[diagnose]`` table over the defaults. A value
    out of range or a misspelt key is one line naming ``diagnose.<key>`` and the file."""
    path = config_file()
    if not path.exists():
        _from_file(path)  # the same error as the engine's when SPECTERM_CONFIG names no file
        return Thresholds()
    try:
        with path.open("rb") as f:
            table = tomllib.load(f).get("diagnose", {})
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as err:
        raise ConfigError(f"config file {path} is not valid TOML: {err}") from None
    if not isinstance(table, dict):
        raise ConfigError(f"config file {path}: [diagnose] must be a table")
    try:
        return Thresholds(**table)
    except ValidationError as err:
        loc, msg = first_error(err)
        raise ConfigError(f"bad diagnose.{'.'.join(str(p) for p in loc)} (from {path}): {msg}") from None
