"""Themes: built-ins load from the package (their only copy, specterm/ui/themes/), user files
validate, and a broken file falls back to the default with a visible error."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from specterm.ui.theming import (
    BUILTIN_THEMES,
    DEFAULT_THEME,
    TOKEN_VARIABLES,
    ThemeFileError,
    load_theme_file,
    load_themes,
    parse_theme,
)


def test_builtins_define_every_token_variable():
    themes = load_themes(dirs=()).themes
    assert [t.name for t in themes] == list(BUILTIN_THEMES)
    for theme in themes:
        assert set(TOKEN_VARIABLES) <= set(theme.variables)
    assert {t.dark for t in themes} == {True, False}


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        ("name = ", "not valid"),
        ('name = "x"\n[colors]\nsecondary = "#fff"\n', "primary"),
        ('name = "x"\n[colors]\nprimary = "not-a-colour"\n', "not a colour"),
        ('name = "x"\ncolour = 1\n[colors]\nprimary = "#fff"\n', "unknown key"),
        ('name = "x"\n[colors]\nprimary = "#fff"\n[variables]\ntoken-accepted = "blurple"\n', "token-accepted"),
        ('[colors]\nprimary = "#fff"\n', "name"),
    ],
)
def test_broken_theme_files_raise_one_line(tmp_path, content, problem):
    path = tmp_path / "bad.toml"
    path.write_text(content)
    with pytest.raises(ThemeFileError) as err:
        load_theme_file(path)
    assert problem in str(err.value) and "\n" not in str(err.value)
    assert str(path) in str(err.value)


def test_json_theme_and_missing_tokens_get_defaults(tmp_path):
    path = tmp_path / "mine.json"
    path.write_text('{"name": "mine", "dark": false, "colors": {"primary": "#123456"}}')
    theme = load_theme_file(path)
    assert theme.name == "mine" and theme.dark is False
    assert theme.variables["token-correction"] == TOKEN_VARIABLES["token-correction"]


def test_user_dir_loads_good_and_reports_bad(tmp_path):
    (tmp_path / "good.toml").write_text('name = "good"\n[colors]\nprimary = "#ff0000"\n')
    (tmp_path / "bad.toml").write_text("this is not toml")
    (tmp_path / "notes.txt").write_text("ignored")
    result = load_themes(dirs=[tmp_path])
    assert "good" in [t.name for t in result.themes]
    assert len(result.errors) == 1 and "bad.toml" in result.errors[0]


def test_parse_theme_rejects_non_table():
    with pytest.raises(ThemeFileError):
        parse_theme(["x"])


def test_app_falls_back_to_default_and_notifies(tmp_path):
    from doubles import FakeEngine

    from specterm.ui.app import make_app

    bad = tmp_path / "broken.toml"
    bad.write_text("[[[")

    async def run() -> tuple[str, list[str]]:
        app = make_app(
            engine=FakeEngine(), gpu=False, theme="broken", theme_files=[bad], theme_dirs=(), deterministic=True
        )
        async with app.run_test() as pilot:
            await pilot.pause()
            return app.theme, [str(n.message) for n in app._notifications]

    theme, notes = asyncio.run(run())
    assert theme == DEFAULT_THEME
    assert any("broken.toml" in n for n in notes)
    assert any("'broken' not found" in n for n in notes)


def test_the_compare_view_reports_a_bad_theme_as_the_dashboard_does(tmp_path):
    """One app base (``ui/base_app.py``): CompareApp used to drop an unknown theme silently."""
    from specterm.session.reader import read_session
    from specterm.ui.compare_app import make_compare_app

    bad = tmp_path / "broken.toml"
    bad.write_text("[[[")
    data = read_session(Path(__file__).resolve().parent.parent / "sample_sessions" / "compare_agent.jsonl")

    async def run() -> tuple[str, list[str]]:
        app = make_compare_app(
            data.header, events=data.events, deterministic=True, theme="nope", theme_files=[bad], theme_dirs=()
        )
        async with app.run_test() as pilot:
            await pilot.pause()
            return app.theme, [str(n.message) for n in app._notifications]

    theme, notes = asyncio.run(run())
    assert theme == DEFAULT_THEME
    assert any("broken.toml" in n for n in notes) and any("'nope' not found" in n for n in notes)
