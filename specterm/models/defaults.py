"""The default pair: which models a run uses when none is configured, why, and building it on demand.

Two local pairs can be the default:

* **smollm2-agent** — SmolLM2-135M-Instruct fine-tuned for the agents with a tiny draft
  (``models/smollm2_agent.py``). It knows language, so it is the default: the pair a new user should
  meet. Built once into the cache (at install, ``scripts/install.sh``, or on first use), offline after.
* **embedded** — the 4.5 M-parameter pair shipped in the source tree (``models/embedded``), trained
  from scratch on the agents' templates. The fallback when the other cannot be built (no engine, or
  no package index on first use), and the fast pair for tests (``SPECTERM_DEFAULT_PAIR=embedded``).

An installed wheel without the embedded pair falls back to the tiny test pair (``models/tiny.py``).
``default_pair()`` only looks; ``ensure_default_pair()`` builds what the choice needs.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

from specterm.errors import ConfigError
from specterm.paths import embedded_pair_dir, model_cache_dir

DEFAULT_PAIR_ENV = "SPECTERM_DEFAULT_PAIR"
PAIRS = ("smollm2-agent", "embedded")


class Pair(NamedTuple):
    name: str
    target: Path
    draft: Path
    why: str


def tiny_pair_dir() -> Path:
    return model_cache_dir("tiny")


def small_model_paths() -> tuple[Path, Path]:
    """The small pair: the embedded pair when shipped, else the tiny test pair (built on demand).
    What ``doctor --deep``'s engine check runs: it tests the engine, not the models."""
    root = embedded_pair_dir()
    if (root / "target" / "config.json").is_file() and (root / "draft" / "config.json").is_file():
        return root / "target", root / "draft"
    root = tiny_pair_dir()
    return root / "target", root / "draft"


def _small(why: str) -> Pair:
    target, draft = small_model_paths()
    name = "embedded" if target.parent == embedded_pair_dir() else "tiny"
    return Pair(name, target, draft, why)


def _choice() -> str | None:
    choice = os.environ.get(DEFAULT_PAIR_ENV, "").strip() or None
    if choice is not None and choice not in PAIRS:
        raise ConfigError(f"{DEFAULT_PAIR_ENV}={choice!r} is not a pair specterm builds; known: {', '.join(PAIRS)}")
    return choice


def default_pair() -> Pair:
    """The pair a run uses when no target is configured, and why; builds nothing."""
    if _choice() == "embedded":
        return _small(f"{DEFAULT_PAIR_ENV}=embedded")
    from specterm.engine.installs import vllm_build
    from specterm.models import smollm2_agent

    if not smollm2_agent.is_shipped():
        return _small(f"the smollm2-agent pair is not shipped in {smollm2_agent.shipped_dir()}")
    if vllm_build() is None:
        return _small("the smollm2-agent pair needs the vLLM engine to build")
    out = model_cache_dir(smollm2_agent.NAME)
    why = "the best local pair: SmolLM2-135M-Instruct fine-tuned for the agents" + (
        "" if smollm2_agent.is_built() else "; not built yet: the first run builds it, about a minute"
    )
    return Pair(smollm2_agent.NAME, out / "target", out / "draft", why)


def default_model_paths() -> tuple[Path, Path]:
    """Target and draft used when none is configured (``default_pair()``'s paths)."""
    pair = default_pair()
    return pair.target, pair.draft


def ensure_small_models(log: Callable[[str], None] = print) -> tuple[Path, Path]:
    from specterm.engine.installs import ENGINE_EXTRA_HINT, vllm_build
    from specterm.errors import EngineUnavailable

    if vllm_build() is None:  # building the pair needs torch/transformers, which come with it
        raise EngineUnavailable(f"the vLLM engine is not installed: {ENGINE_EXTRA_HINT}")
    target, draft = small_model_paths()
    if target.parent == embedded_pair_dir():  # shipped, nothing to build
        return target, draft
    from specterm.models.tiny import build_tiny_pair

    if not (target / "config.json").exists() or not (draft / "config.json").exists():
        log(f"specterm: building the default tiny model pair in {target.parent} (once, ~1 min)")
    return build_tiny_pair(tiny_pair_dir())


def ensure_default_pair(log: Callable[[str], None] = print) -> Pair:
    """``default_pair()``, built. smollm2-agent that cannot be fetched (no package index on first
    use) falls back to the small pair with one line saying so; the next run tries again."""
    pair = default_pair()
    if pair.name == "smollm2-agent":
        from specterm.models.fetch import FetchError
        from specterm.models.smollm2_agent import ensure_smollm2_agent

        try:
            target, draft = ensure_smollm2_agent(log=log)
            return pair._replace(target=target, draft=draft)
        except FetchError as err:
            log(f"specterm: {err}; using the small embedded pair this time")
            pair = _small(f"smollm2-agent could not be built ({err})")
    target, draft = ensure_small_models(log)
    return pair._replace(target=target, draft=draft)


TRAINED_FOR = ("sql_analyst", "ops_assistant")
"""The agents whose transcripts the local pairs learned (``models/training/corpus.py``): all they know."""
GENERAL_MODEL_HINT = (
    "a general instruct model that calls tools, e.g. the Qwen2.5-Coder 1.5B/0.5B pair "
    "(scripts/fetch_qwen_pair.py): --target DIR --draft DIR"
)


def local_pair_of(target: str | Path | None) -> str | None:
    """Which local trained pair ``target`` is (``smollm2-agent``, ``embedded``), if any."""
    if not target:
        return None
    path = Path(target).expanduser().resolve()
    for name, root in (("smollm2-agent", model_cache_dir("smollm2-agent")), ("embedded", embedded_pair_dir())):
        if path == (root / "target").resolve():
            return name
    return None


def agent_fit(target: str | Path | None, agent: str) -> str | None:
    """One line when ``target`` is a local pair pointed at an agent it was not trained for."""
    pair = local_pair_of(target)
    if pair is None or agent in TRAINED_FOR:
        return None
    return (
        f"the {pair} pair was trained only for the shipped agents ({', '.join(TRAINED_FOR)}): with "
        f"{agent} expect wrong tool calls or none; use {GENERAL_MODEL_HINT}"
    )


def ensure_default_models(log: Callable[[str], None] = print) -> tuple[Path, Path]:
    pair = ensure_default_pair(log)
    return pair.target, pair.draft
