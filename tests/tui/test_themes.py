"""Themes: every package theme loads and defines llamachat's variables, a broken user
theme is reported and skipped, stylesheets using the variables work under every
registered theme, and the chosen theme is remembered in the config file."""

from __future__ import annotations

import tomllib
from importlib.resources import files

import pytest
from textual.app import App, ComposeResult
from textual.color import Color
from textual.theme import BUILTIN_THEMES
from textual.widgets import Static

from sessions import paths
from sessions.config import Config, load_config
from tui import theme_loader
from tui.theme_loader import LLAMACHAT_VARIABLES, load_themes, register_themes

GOOD_USER_THEME = """
name = "my-night"
dark = true
primary = "#336699"
accent = "#cc8800"
background = "#101010"
"""


def _colour(value: str) -> Color:
    return Color.parse(value.split()[0])


def package_theme_files() -> list:
    return sorted((f for f in files("themes").iterdir() if f.name.endswith(".toml")),
                  key=lambda f: f.name)


class VariablesApp(App[None]):
    """Uses every llamachat variable in its stylesheet, as the real app's TCSS will."""

    CSS = "\n".join(
        f"#v{index} {{ background: ${name}; color: ${name}; }}"
        for index, name in enumerate(LLAMACHAT_VARIABLES)
    )

    def __init__(self) -> None:
        super().__init__()
        self.problems = register_themes(self)

    def get_theme_variable_defaults(self) -> dict[str, str]:
        return theme_loader.default_variables()

    def compose(self) -> ComposeResult:
        for index, _ in enumerate(LLAMACHAT_VARIABLES):
            yield Static(f"variable {index}", id=f"v{index}")


def test_every_package_theme_loads_with_every_variable_written_out():
    themes, problems = load_themes()
    assert problems == []
    names = {theme.name for theme in themes}
    assert {"llamachat-dark", "llamachat-light"} <= names
    assert len(package_theme_files()) >= 4
    for entry in package_theme_files():
        data = tomllib.loads(entry.read_text(encoding="utf-8"))
        assert data["name"] in names
        assert data["name"] not in BUILTIN_THEMES, f"{entry.name} shadows a Textual theme"
        missing = set(LLAMACHAT_VARIABLES) - set(data["variables"])
        assert not missing, f"{entry.name} lacks {sorted(missing)}"
        for name in LLAMACHAT_VARIABLES:
            _colour(data["variables"][name])


def test_light_and_dark_flags_come_from_the_files():
    themes = {theme.name: theme for theme in load_themes()[0]}
    assert themes["llamachat-dark"].dark is True
    assert themes["llamachat-light"].dark is False


def test_broken_user_themes_are_reported_and_skipped(tmp_path):
    folder = tmp_path / "themes"
    folder.mkdir()
    (folder / "syntax.toml").write_text('name = "oops\nprimary = 1', encoding="utf-8")
    (folder / "nameless.toml").write_text('primary = "#123456"\n', encoding="utf-8")
    (folder / "colour.toml").write_text('name = "bad-colour"\nprimary = "blurple"\n', encoding="utf-8")
    (folder / "typo.toml").write_text('name = "typo"\nprimay = "#123456"\n', encoding="utf-8")
    (folder / "variable.toml").write_text(
        'name = "bad-var"\nprimary = "#123456"\n[variables]\ntree-active = "nope"\n',
        encoding="utf-8")
    (folder / "good.toml").write_text(GOOD_USER_THEME, encoding="utf-8")
    themes, problems = load_themes(folder)
    names = {theme.name for theme in themes}
    assert "my-night" in names and "llamachat-dark" in names
    assert not names & {"bad-colour", "typo", "bad-var", "oops"}
    assert len(problems) == 5
    by_file = {name: next(p for p in problems if name in p) for name in
               ("syntax.toml", "nameless.toml", "colour.toml", "typo.toml", "variable.toml")}
    assert "not valid TOML" in by_file["syntax.toml"]
    assert "no name" in by_file["nameless.toml"]
    assert "'primary' is not a colour" in by_file["colour.toml"]
    assert "primay" in by_file["typo.toml"]
    assert "tree-active" in by_file["variable.toml"]
    assert all("skipped" in problem for problem in problems)


def test_missing_variables_are_derived_from_the_theme_colours(tmp_path):
    folder = tmp_path / "themes"
    folder.mkdir()
    (folder / "good.toml").write_text(GOOD_USER_THEME, encoding="utf-8")
    theme = {t.name: t for t in load_themes(folder)[0]}["my-night"]
    assert set(LLAMACHAT_VARIABLES) <= set(theme.variables)
    assert _colour(theme.variables["tree-active"]) == Color.parse("#cc8800")
    assert _colour(theme.variables["user-message-border"]) == Color.parse("#336699")
    for name in LLAMACHAT_VARIABLES:
        _colour(theme.variables[name])


def test_a_user_theme_replaces_a_package_theme_of_the_same_name(tmp_path):
    folder = tmp_path / "themes"
    folder.mkdir()
    (folder / "mine.toml").write_text('name = "kanagawa"\nprimary = "#010203"\n', encoding="utf-8")
    themes = [t for t in load_themes(folder)[0] if t.name == "kanagawa"]
    assert len(themes) == 1 and themes[0].primary == "#010203"


def test_user_themes_come_from_the_config_folder():
    folder = paths.config_dir() / "themes"
    folder.mkdir(parents=True)
    (folder / "good.toml").write_text(GOOD_USER_THEME, encoding="utf-8")
    assert "my-night" in {theme.name for theme in load_themes()[0]}


async def test_stylesheets_using_the_variables_work_under_every_registered_theme():
    app = VariablesApp()
    assert app.problems == []
    assert {"llamachat-dark", "kanagawa", "nord", "textual-dark", "ansi-dark"} <= set(app.available_themes)
    async with app.run_test() as pilot:
        for name in sorted(app.available_themes):
            app.theme = name
            await pilot.pause()
            variables = app.get_css_variables()
            assert set(LLAMACHAT_VARIABLES) <= set(variables), name
            if not app.current_theme.ansi:
                expected = _colour(variables["tree-active"])
                widget = app.query_one(f"#v{LLAMACHAT_VARIABLES.index('tree-active')}")
                assert widget.styles.color.rgb == expected.rgb, name


async def test_apply_saved_theme_uses_the_config_or_falls_back_with_a_reason():
    app = VariablesApp()
    async with app.run_test():
        assert theme_loader.apply_saved_theme(app, Config(theme="kanagawa")) is None
        assert app.theme == "kanagawa"
        problem = theme_loader.apply_saved_theme(app, Config(theme="no-such-theme"))
        assert app.theme == "llamachat-dark"
        assert problem is not None and "no-such-theme" in problem


def test_the_chosen_theme_is_remembered_in_the_config_file():
    assert theme_loader.remember_theme("everforest-dark") is None
    assert 'theme = "everforest-dark"' in paths.config_file().read_text(encoding="utf-8")
    assert load_config().config.theme == "everforest-dark"


def test_remembering_reports_a_config_file_it_must_not_overwrite():
    paths.config_file().parent.mkdir(parents=True, exist_ok=True)
    paths.config_file().write_text("theme = [unclosed\n", encoding="utf-8")
    problem = theme_loader.remember_theme("kanagawa")
    assert problem is not None and "not saved" in problem
    assert paths.config_file().read_text(encoding="utf-8") == "theme = [unclosed\n"


@pytest.mark.parametrize("name", sorted(BUILTIN_THEMES))
def test_every_builtin_theme_gets_usable_fallback_variables(name):
    theme = theme_loader.with_llamachat_variables(BUILTIN_THEMES[name])
    for variable in LLAMACHAT_VARIABLES:
        _colour(theme.variables[variable])
