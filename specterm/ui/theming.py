"""Themes: the built-in dark / light / high-contrast themes and user theme files.

A theme file is TOML (``.toml``) or JSON (``.json``)::

    name = "my-theme"
    dark = true
    [colors]          # Textual theme colours: primary (required), secondary, accent, foreground,
    primary = "#5fafd7"  # background, surface, panel, warning, error, success
    [variables]       # CSS variables; token-* pick the verdict colours in the transcript
    token-accepted = "#87d787"

Where the built-ins live: ``specterm/ui/themes/`` (``paths.builtin_theme_dir()``), their only copy,
loaded at run time and what a user copies to start their own theme. They are inside the package
because wheels carry only package files (a top-level ``themes/`` would not be installed).

User themes: every ``*.toml`` / ``*.json`` in ``$SPECTERM_THEME_DIR`` or
``<user config dir>/specterm/themes``, or one ``--theme-file``. A broken file never stops the app:
it is reported (one line each) and the default theme is used.
"""

from __future__ import annotations

import json
import tomllib
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    StrictStr,
    ValidationError,
    field_validator,
)
from textual.color import Color, ColorParseError
from textual.theme import Theme

from specterm.errors import first_error
from specterm.paths import builtin_theme_dir, user_theme_dirs
from specterm.ui.widgets.styles import TOKEN_CLASSES

DEFAULT_THEME = "specterm-dark"
BUILTIN_THEMES = ("specterm-dark", "specterm-light", "specterm-high-contrast")

# Fallbacks for themes that do not set them (e.g. Textual's own built-in themes): ANSI colour names,
# so they follow the terminal's palette on 16-colour terminals.
_FALLBACK_COLOURS: dict[str, str] = {
    "accepted": "ansi_green",
    "correction": "ansi_red",
    "bonus": "ansi_cyan",
    "target": "ansi_yellow",
    "forced": "ansi_bright_black",
    "rejected": "ansi_bright_black",
}
# One ``token-<name>`` variable per token class (``styles.TOKEN_CLASSES``, from ``events.Verdict``):
# a class without a fallback colour fails at import.
TOKEN_VARIABLES: dict[str, str] = {f"token-{name}": _FALLBACK_COLOURS[name] for name in TOKEN_CLASSES}


class ThemeFileError(ValueError):
    """A theme file that cannot be used; ``str()`` is one line naming the file and the problem."""


def _colour(value: str) -> str:
    try:
        Color.parse(value)
    except ColorParseError as err:
        raise ValueError(f"{value!r} is not a colour ({err})") from None
    return value


Colour = Annotated[str, AfterValidator(_colour)]


class ThemeColors(BaseModel):
    """Textual theme colours; ``primary`` is required, the rest are derived by Textual when absent."""

    model_config = ConfigDict(extra="forbid")

    primary: Colour
    secondary: Colour | None = None
    accent: Colour | None = None
    foreground: Colour | None = None
    background: Colour | None = None
    surface: Colour | None = None
    panel: Colour | None = None
    boost: Colour | None = None
    warning: Colour | None = None
    error: Colour | None = None
    success: Colour | None = None


class ThemeFile(BaseModel):
    """A theme file (TOML, or JSON with the same keys)."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1)
    dark: StrictBool = True
    colors: ThemeColors
    variables: dict[str, StrictStr] = Field(default_factory=dict)
    """CSS variables; the ``token-*`` ones (the verdict colours) must be colours."""
    luminosity_spread: float = 0.15
    text_alpha: float = 0.95

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        if not v.strip():
            raise ValueError("must be a non-empty string")
        return v.strip()

    @field_validator("variables")
    @classmethod
    def _token_colours(cls, v: dict[str, str]) -> dict[str, str]:
        for key, value in v.items():
            if key in TOKEN_VARIABLES:
                try:
                    _colour(value)
                except ValueError as err:
                    raise ValueError(f"{key}: {err}") from None
        return v


def parse_theme(data: Any, source: str = "<theme>") -> Theme:
    """Validate a decoded theme file (``ThemeFile``) and build a Textual ``Theme``; raises
    ``ThemeFileError`` with one line naming the source, the key and the problem."""
    if not isinstance(data, dict):
        raise ThemeFileError(f"{source}: a theme is a table/object, got {type(data).__name__}")
    try:
        theme = ThemeFile.model_validate(data)
    except ValidationError as err:
        loc, msg = first_error(err)
        where = ".".join(str(p) for p in loc)
        if msg == "Extra inputs are not permitted":
            msg = "unknown key" if len(loc) == 1 else "unknown colour"
        elif msg == "Field required" and loc == ("colors", "primary"):
            msg = "[colors] must have at least 'primary'"
        raise ThemeFileError(f"{source}: {where}: {msg}") from None
    colors = theme.colors.model_dump(exclude_none=True)
    return Theme(
        name=theme.name,
        dark=theme.dark,
        variables={**TOKEN_VARIABLES, **theme.variables},
        luminosity_spread=theme.luminosity_spread,
        text_alpha=theme.text_alpha,
        **colors,
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
