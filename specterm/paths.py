"""Where specterm keeps things: the one module that knows the directories.

Per user (platformdirs, each overridable by an environment variable):

* **config** — ``~/.config/specterm/config.toml`` (``$SPECTERM_CONFIG``), user themes in
  ``~/.config/specterm/themes`` (``$SPECTERM_THEME_DIR``);
* **data** — ``~/.local/share/specterm`` (``$SPECTERM_DATA_DIR``): recorded sessions;
* **cache** — ``~/.cache/specterm`` (``$SPECTERM_CACHE_DIR``): agents' SQLite databases and vector
  stores (``agents/``), the engine log (``logs/engine.log``);
* **models** — ``~/.cache/specterm/models`` (``$SPECTERM_MODELS_DIR``, else ``models/`` under the
  cache): the models specterm builds or imports (``tiny``, ``smollm2-135m-instruct``, …). Apart from
  the cache so that the two can be moved separately: the tests give the cache a fresh temporary
  directory and keep the models they build in the checkout (``.cache/test-models``).

Shipped with specterm: the agents (``agents/``, plus ``$SPECTERM_AGENTS_DIR``), the embedded pair
(``models/embedded``) and the built-in themes (package data). Agents and the embedded pair sit at
the top of the source tree; a wheel installs them as data files under ``<prefix>/share/specterm``
(``[tool.setuptools.data-files]``), where ``shipped()`` finds them when there is no source tree. Every other module asks here; none computes a path
from its own ``__file__``. Imports nothing from specterm: everything may import it.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

CONFIG_ENV = "SPECTERM_CONFIG"
DATA_DIR_ENV = "SPECTERM_DATA_DIR"
CACHE_DIR_ENV = "SPECTERM_CACHE_DIR"
MODELS_DIR_ENV = "SPECTERM_MODELS_DIR"
THEME_DIR_ENV = "SPECTERM_THEME_DIR"
AGENTS_DIR_ENV = "SPECTERM_AGENTS_DIR"

PACKAGE = Path(__file__).resolve().parent
REPO = PACKAGE.parent
"""The source checkout (for an installed wheel: site-packages, which holds no shipped data)."""
INSTALLED_DATA = Path(sys.prefix) / "share" / "specterm"
"""Where a wheel installs the shipped agents and models."""


def shipped(*parts: str) -> Path:
    """A shipped file or directory: in the source tree when there is one, else where the wheel put it."""
    here = REPO.joinpath(*parts)
    if here.exists():
        return here
    installed = INSTALLED_DATA.joinpath(*parts)
    return installed if installed.exists() else here


def config_file() -> Path:
    override = os.environ.get(CONFIG_ENV)
    if override:
        return Path(override).expanduser()
    from platformdirs import user_config_dir

    return Path(user_config_dir("specterm")) / "config.toml"


def data_dir() -> Path:
    """``$SPECTERM_DATA_DIR``, else ``user_data_dir("specterm")`` (``~/.local/share/specterm``)."""
    override = os.environ.get(DATA_DIR_ENV)
    if override:
        return Path(override).expanduser()
    from platformdirs import user_data_dir

    return Path(user_data_dir("specterm"))


def cache_dir() -> Path:
    override = os.environ.get(CACHE_DIR_ENV)
    if override:
        return Path(override).expanduser()
    from platformdirs import user_cache_dir

    return Path(user_cache_dir("specterm"))


def models_dir() -> Path:
    """``$SPECTERM_MODELS_DIR``, else ``models`` under ``cache_dir()`` (``~/.cache/specterm/models``)."""
    override = os.environ.get(MODELS_DIR_ENV)
    if override:
        return Path(override).expanduser()
    return cache_dir() / "models"


def model_cache_dir(name: str) -> Path:
    """A model specterm builds or imports on demand (``tiny``, ``smollm2-135m-instruct``, …)."""
    return models_dir() / name


def portable(model: str | None) -> str | None:
    """A model as a recorded session names it. Sessions travel (shared, committed, replayed on other
    machines), and an absolute path says nothing there except this machine's user name: a shipped
    model is named relative to the checkout or the installed data (``models/embedded/target``), one
    under the home directory as ``~/…`` (``~/.cache/specterm/models/smollm2-agent/target``: the
    default cache, so the name reads the same for every user); a hub id or any other path is kept."""
    if not model or not Path(model).is_absolute():
        return model
    path = Path(model).resolve()
    for root in (REPO, INSTALLED_DATA):
        if path.is_relative_to(root):
            return path.relative_to(root).as_posix()
    home = Path.home().resolve()
    return f"~/{path.relative_to(home).as_posix()}" if path.is_relative_to(home) else model


def engine_log_file() -> Path:
    """Where the dashboard's engine process writes its stdout/stderr (vLLM's logging), off the screen."""
    return cache_dir() / "logs" / "engine.log"


def agent_cache_dir(agent: str) -> Path:
    """An agent's built state: its SQLite database and vector store."""
    return cache_dir() / "agents" / agent


def user_theme_dirs() -> list[Path]:
    override = os.environ.get(THEME_DIR_ENV)
    if override:
        return [Path(override).expanduser()]
    from platformdirs import user_config_dir

    return [Path(user_config_dir("specterm")) / "themes"]


def builtin_theme_dir() -> Path:
    return PACKAGE / "ui" / "themes"


def shipped_agents_dir() -> Path:
    return shipped("agents")


def agent_dirs() -> list[Path]:
    """Where agents are looked up, first match wins: ``$SPECTERM_AGENTS_DIR`` entries, then the shipped ones."""
    extra = [Path(p).expanduser() for p in os.environ.get(AGENTS_DIR_ENV, "").split(os.pathsep) if p]
    return [*extra, shipped_agents_dir()]


def embedded_pair_dir() -> Path:
    """The trained pair shipped with specterm (``specterm models train`` reproduces it)."""
    return shipped("models", "embedded")
