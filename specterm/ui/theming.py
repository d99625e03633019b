"""Themes: the built-in dark / light / high-contrast themes and user theme files.

A theme file is TOML (``.toml``) or JSON (``.json``)::

    name = "my-theme"
    dark = true
    [colors]          # Textual theme colours: primary (required), secondary, accent, foreground,
    primary = "#5fafd7"  # background, surface, panel, warning, error, success
    [variables]       # CSS variables; token-* pick the verdict colours in the transcript
    token-accepted = "#87d787"

Where the built-ins live: the canonical files are the repo's ``themes/`` folder (what a user copies
to start their own theme). Wheels only carry files inside the package, and locating ``themes/``
relative to the package breaks in an installed wheel (``site-packages/themes`` would be looked up
— or worse, another project's folder of that name), so the package ships a copy under
``specterm/ui/themes/``, which is what is loaded at run time. ``tests/test_ui_themes.py`` fails if
the two copies drift apart.

User themes: every ``*.toml`` / ``*.json`` in ``$SPECTERM_THEME_DIR`` or
``<user config dir>/specterm/themes``, or one ``--theme-file``. A broken file never stops the app:
it is reported (one line each) and the default theme is used.
"""

from __future__ import annotations

import json
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

from textual.color import Color, ColorParseError
from textual.theme import Theme

from specterm.paths import builtin_theme_dir, user_theme_dirs

DEFAULT_THEME = "specterm-dark"
BUILTIN_THEMES = ("specterm-dark", "specterm-light", "specterm-high-contrast")

TOKEN_VARIABLES: dict[str, str] = {
    # Fallbacks for themes that do not set them (e.g. Textual's own built-in themes): ANSI colour
    # names, so they follow the terminal's palette on 16-colour terminals.
    "token-accepted": "ansi_green",
    "token-correction": "ansi_red",
    "token-bonus": "ansi_cyan",
    "token-target": "ansi_yellow",
    "token-forced": "ansi_bright_black",
    "token-rejected": "ansi_bright_black",
}
_COLOR_KEYS = (
    "primary",
    "secondary",
    "accent",
    "foreground",
    "background",
    "surface",
    "panel",
    "boost",
    "warning",
    "error",
    "success",
)
_TOP_KEYS = {"name", "dark", "colors", "variables", "luminosity_spread", "text_alpha"}


class ThemeFileError(ValueError):
    """A theme file that cannot be used; ``str()`` is one line naming the file and the problem."""


def _check_color(value: Any, where: str) -> str:
    if not isinstance(value, str):
        raise ThemeFileError(f"{where}: expected a colour string, got {type(value).__name__}")
    try:
        Color.parse(value)
    except ColorParseError as err:
        raise ThemeFileError(f"{where}: {value!r} is not a colour ({err})") from None
    return value


def parse_theme(data: Any, source: str = "<theme>") -> Theme:
    """Validate a decoded theme file and build a Textual ``Theme``; raises ``ThemeFileError``."""
    if not isinstance(data, dict):
        raise ThemeFileError(f"{source}: a theme is a table/object, got {type(data).__name__}")
    unknown = set(data) - _TOP_KEYS
    if unknown:
        raise ThemeFileError(f"{source}: unknown key(s) {', '.join(sorted(unknown))}")
    name = data.get("name")
    if not isinstance(name, str) or not name.strip():
        raise ThemeFileError(f"{source}: 'name' must be a non-empty string")
    colors = data.get("colors", {})
    if not isinstance(colors, dict) or "primary" not in colors:
        raise ThemeFileError(f"{source}: [colors] must be a table with at least 'primary'")
    bad = set(colors) - set(_COLOR_KEYS)
    if bad:
        raise ThemeFileError(f"{source}: unknown colour(s) {', '.join(sorted(bad))}")
    checked = {key: _check_color(value, f"{source}: colors.{key}") for key, value in colors.items()}
    variables = data.get("variables", {})
    if not isinstance(variables, dict):
        raise ThemeFileError(f"{source}: [variables] must be a table")
    for key, value in variables.items():
        if not isinstance(value, str):
            raise ThemeFileError(f"{source}: variables.{key} must be a string")
        if key in TOKEN_VARIABLES:
            _check_color(value, f"{source}: variables.{key}")
    dark = data.get("dark", True)
    if not isinstance(dark, bool):
        raise ThemeFileError(f"{source}: 'dark' must be true or false")
    return Theme(
        name=name.strip(),
        dark=dark,
        variables={**TOKEN_VARIABLES, **variables},
        luminosity_spread=float(data.get("luminosity_spread", 0.15)),
        text_alpha=float(data.get("text_alpha", 0.95)),
        **checked,
    )


def load_theme_file(path: str | Path) -> Theme:
    path = Path(path)
    try:
        raw = path.read_bytes()
    except OSError as err:
        raise ThemeFileError(f"{path}: cannot read ({err.strerror or err})") from None
    try:
        if path.suffix.lower() == ".json":
            data = json.loads(raw)
        else:
            data = tomllib.loads(raw.decode("utf-8"))
    except (ValueError, UnicodeDecodeError) as err:  # JSONDecodeError and TOMLDecodeError are ValueErrors
        raise ThemeFileError(f"{path}: not valid {path.suffix.lstrip('.') or 'TOML'} ({err})") from None
    return parse_theme(data, str(path))


@dataclass
class ThemeSet:
    themes: list[Theme] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


def load_builtin_themes() -> list[Theme]:
    return [load_theme_file(builtin_theme_dir() / f"{name.removeprefix('specterm-')}.toml") for name in BUILTIN_THEMES]


def load_themes(dirs: Iterable[Path] | None = None, files: Iterable[str | Path] = ()) -> ThemeSet:
    """Built-ins, then user theme files (a user theme may override a built-in by name)."""
    result = ThemeSet(themes=load_builtin_themes())
    paths: list[Path] = []
    for directory in user_theme_dirs() if dirs is None else dirs:
        if Path(directory).is_dir():
            paths.extend(sorted(p for p in Path(directory).iterdir() if p.suffix.lower() in (".toml", ".json")))
    paths.extend(Path(f) for f in files)
    for path in paths:
        try:
            result.themes.append(load_theme_file(path))
        except ThemeFileError as err:
            result.errors.append(str(err))
    return result
