"""What every specterm app shares: the dashboard's stylesheet, the themes (built-in, user files and
directories, with the token variables Textual's own themes lack) and their one-line errors.

``SpecTermApp`` (the dashboard) and ``CompareApp`` (two configurations side by side) both derive from
it, so a theme that fails to load is reported the same way in each instead of dropped silently.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from textual.app import App

from specterm.ui.theming import DEFAULT_THEME, TOKEN_VARIABLES, load_themes


class ThemedApp(App):
    CSS_PATH = "app.tcss"  # the verdict styles and theme variables of the dashboard

    def setup_themes(
        self, theme: str | None, theme_dirs: Iterable[Path] | None, theme_files: Iterable[str | Path] = ()
    ) -> None:
        """Register the themes and pick ``theme``; what went wrong waits for ``show_theme_errors``
        (a notification needs a screen)."""
        themes = load_themes(theme_dirs, theme_files)
        for t in themes.themes:
            self.register_theme(t)
        self._theme_errors = list(themes.errors)
        wanted = theme or DEFAULT_THEME
        if wanted not in self.available_themes:
            self._theme_errors.append(f"theme {wanted!r} not found; using {DEFAULT_THEME}")
            wanted = DEFAULT_THEME
        self.theme = wanted

    def show_theme_errors(self) -> None:
        for err in getattr(self, "_theme_errors", ()):
            self.notify(err, title="theme file ignored", severity="error", timeout=15)
        self._theme_errors = []

    def get_theme_variable_defaults(self) -> dict[str, str]:
        # Textual's own themes lack the token-* variables; these keep app.tcss valid under them.
        return dict(TOKEN_VARIABLES)
