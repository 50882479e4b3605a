"""The fuzzy matcher, the session and model pickers, and the dialogs, driven with real keys."""

from __future__ import annotations

import json
import shutil

import pytest
from textual.app import App
from textual.screen import Screen
from textual.widgets import Button, DataTable, Input, Static

from sessions.api.chat import ModelCatalogue, SessionController
from sessions.config import Config
from sessions.store import SessionStore
from sessions.synth import expected_kind, make_model
from tests.tui.fake_engine import FakeEngineFactory
from tests.tui.helpers import wait_for
from tui.fuzzy import fuzzy_match, fuzzy_rank
from tui.screens.dialogs import ConfirmScreen, ExportScreen, TextPrompt
from tui.screens.model_picker import DEMO_KEY, DOWNLOAD_KEY, KIND_NAMES, ModelPicker
from tui.screens.session_picker import Picked, SessionPicker
from tui.theme_loader import default_variables, register_themes


def test_fuzzy_needs_every_letter_in_order_and_ignores_case_and_spaces():
    assert fuzzy_match("rl", "Rust lifetimes").positions == (0, 5)
    assert fuzzy_match("RUST LIFE", "rust lifetimes") is not None
    assert fuzzy_match("lr", "Rust lifetimes") is None
    assert fuzzy_match("xyz", "Rust lifetimes") is None
    assert fuzzy_match("", "anything").score == 0


def test_fuzzy_finds_the_best_placement_not_the_first():
    assert fuzzy_match("ca", "a cat").positions == (2, 3)


def test_fuzzy_ranks_contiguous_and_word_start_matches_first():
    titles = ["a scattered rust thing", "curious test", "trust me", "Rust lifetimes"]
    ranked = [title for title, _ in fuzzy_rank("rust", titles, str)]
    assert ranked[0] == "Rust lifetimes"  # a whole word at the start
    assert ranked.index("a scattered rust thing") < ranked.index("trust me")  # word start
    assert ranked.index("trust me") < ranked.index("curious test")  # contiguous beats gaps
    initials = [title for title, _ in fuzzy_rank("kc", ["bookcase", "KV cache"], str)]
    assert initials == ["KV cache", "bookcase"]


def test_fuzzy_ties_keep_the_original_order():
    titles = ["chat one", "chat two", "chat three"]
    assert [t for t, _ in fuzzy_rank("chat", titles, str)] == titles
    assert [t for t, _ in fuzzy_rank("", titles, str)] == titles


class HostApp(App[None]):
    """An empty app that opens one screen and records what it returns."""

    def __init__(self) -> None:
        super().__init__()
        register_themes(self)
        self.results: list[object] = []

    def get_theme_variable_defaults(self) -> dict[str, str]:
        return default_variables()

    def open(self, screen: Screen) -> None:
        self.push_screen(screen, self.results.append)


async def settle(pilot) -> None:
    """Wait until the picker on top has listed what it looks for (its worker starts when it
    mounts, which may be after ``open`` returns), every worker has finished, and their
    messages were handled."""
    await wait_for(pilot, lambda: listed(pilot.app.screen), "the picker's list")
    await pilot.app.workers.wait_for_complete()
    await pilot.pause()


def listed(screen: Screen) -> bool:
    if isinstance(screen, ModelPicker):
        return screen.discovered
    if isinstance(screen, SessionPicker):
        return screen.loaded
    return True


@pytest.fixture
def store():
    with SessionStore.open() as opened:
        yield opened


@pytest.fixture
def controller(store):
    """What the pickers read sessions through and the export dialog writes through."""
    return SessionController(store, engine_factory=FakeEngineFactory())


def add_session(store: SessionStore, title: str, text: str) -> int:
    session = store.create_session(title=title)
    store.add_message(session.id, None, "user", text)
    return session.id


async def test_session_picker_lists_ranks_searches_and_returns_the_id(store, controller):
    rust = add_session(store, "Rust lifetimes", "How long does a reference live?")
    python = add_session(store, "Python packaging", "pyproject or setup.py?")
    vague = add_session(store, "Question", "The borrow checker rejects my loop")
    app = HostApp()
    async with app.run_test() as pilot:
        picker = SessionPicker(controller.library)
        app.open(picker)
        await settle(pilot)
        assert picker.shown_ids == [vague, python, rust]  # newest first
        await pilot.press(*"pack")
        await settle(pilot)
        assert picker.shown_ids[0] == python
        await pilot.press(*["backspace"] * 4, *"borrow")
        await settle(pilot)
        assert picker.shown_ids == [vague]  # found in the message text, not the title
        assert "borrow" in str(picker.query_one("#picker-options").options[0].prompt)
        await pilot.press("enter")
        await pilot.pause()
    assert [(p.session_id, p.message_id is not None) for p in app.results] == [(vague, True)]


async def test_session_picker_arrow_keys_no_match_and_escape(store, controller):
    first = add_session(store, "Alpha", "a")
    add_session(store, "Beta", "b")
    app = HostApp()
    async with app.run_test() as pilot:
        app.open(SessionPicker(controller.library))
        await settle(pilot)
        await pilot.press("down", "enter")
        await pilot.pause()
        picker = SessionPicker(controller.library)
        app.open(picker)
        await settle(pilot)
        await pilot.press(*"zzzz")
        await settle(pilot)
        assert picker.shown_ids == []
        assert "Nothing matches" in str(picker.query_one("#picker-status", Static).render())
        await pilot.press("escape")
        await pilot.pause()
    assert app.results == [Picked(first), None]


@pytest.fixture
def model_dir(tmp_path, monkeypatch):
    """Four made models (one per memory kind) and one broken file, in a private folder."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    for name in ("HF_HUB_CACHE", "HF_HOME", "XDG_CACHE_HOME", "LLAMA_CACHE", "LMSTUDIO_MODELS_DIR"):
        monkeypatch.delenv(name, raising=False)
    folder = tmp_path / "models"
    folder.mkdir()
    for arch in ("llama", "gemma3", "lfm2", "mamba"):
        shutil.copyfile(make_model(arch, "tiny"), folder / f"{arch}.gguf")
    (folder / "broken.gguf").write_bytes(b"this is not a model")
    return folder


async def test_model_picker_lists_models_with_their_memory_kind(model_dir):
    app = HostApp()
    async with app.run_test(size=(120, 36)) as pilot:
        picker = ModelPicker(ModelCatalogue(), Config(model_dirs=[str(model_dir)]))
        app.open(picker)
        await settle(pilot)
        assert picker.discovered
        table = picker.query_one(DataTable)
        assert table.row_count == 2 + 5
        assert "Demo model" in str(table.get_row(DEMO_KEY)[0])
        assert "Download a model by name" in str(table.get_row(DOWNLOAD_KEY)[0])
        by_file = {card.path.name: (index, card) for index, card in enumerate(picker.cards)}
        assert set(by_file) == {"llama.gguf", "gemma3.gguf", "lfm2.gguf", "mamba.gguf", "broken.gguf"}
        for arch in ("llama", "gemma3", "lfm2", "mamba"):
            index, card = by_file[f"{arch}.gguf"]
            assert str(table.get_row(str(index))[1]) == KIND_NAMES[expected_kind(arch)]
        index, broken = by_file["broken.gguf"]
        name_cell = table.get_row(str(index))[0]
        assert broken.error and broken.error[:20] in str(name_cell) and "dim" in str(name_cell.style)
        await pilot.press(*["down"] * (by_file["lfm2.gguf"][0] + 2), "enter")
        await pilot.pause()
    assert app.results == [model_dir / "lfm2.gguf"]


async def test_model_picker_demo_entry_makes_the_demo_model(model_dir):
    app = HostApp()
    async with app.run_test(size=(120, 36)) as pilot:
        app.open(ModelPicker(ModelCatalogue(), Config(model_dirs=[str(model_dir)])))
        await settle(pilot)
        await pilot.press("enter")  # the cursor starts on the demo row
        await settle(pilot)
    assert app.results == [make_model("llama", "tiny")]


async def test_model_picker_says_why_the_demo_model_could_not_be_made(model_dir, monkeypatch):
    import sessions.synth

    def disk_full(*_args, **_kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(sessions.synth, "make_model", disk_full)
    app = HostApp()
    async with app.run_test(size=(120, 36)) as pilot:
        picker = ModelPicker(ModelCatalogue(), Config(model_dirs=[str(model_dir)]))
        app.open(picker)
        await settle(pilot)
        await pilot.press("enter")  # the demo row
        status = picker.query_one("#picker-status", Static)
        await wait_for(pilot, lambda: str(status.render()).startswith("the demo model could not be made: "),
                       "the reason said")
        assert "No space left" in str(status.render()) and status.has_class("-error")
        assert app.screen is picker and app.results == []


async def test_model_picker_typed_path_unusable_rows_and_escape(model_dir):
    app = HostApp()
    async with app.run_test(size=(120, 36)) as pilot:
        picker = ModelPicker(ModelCatalogue(), Config(model_dirs=[str(model_dir)]))
        app.open(picker)
        await settle(pilot)
        broken_row = 2 + [card.path.name for card in picker.cards].index("broken.gguf")
        await pilot.press(*["down"] * broken_row)
        broken = picker.cards[broken_row - 2]
        detail = picker.query_one("#model-detail", Static)
        await wait_for(pilot, lambda: broken.error in str(detail.render()), "the broken file's reason shown")
        await pilot.press("enter")
        status = picker.query_one("#picker-status", Static)
        await wait_for(pilot, lambda: "cannot be used" in str(status.render()), "the refusal said")
        assert status.has_class("-error")
        path_input = picker.query_one("#model-path", Input)
        path_input.focus()
        path_input.value = str(model_dir / "missing.gguf")
        await pilot.press("enter")
        await wait_for(pilot, lambda: "missing.gguf" in str(status.render()), "the missing file named")
        assert app.results == []
        path_input.value = str(model_dir / "mamba.gguf")
        await pilot.press("enter")
        await wait_for(pilot, lambda: app.results == [model_dir / "mamba.gguf"], "the file chosen")
        app.open(ModelPicker(ModelCatalogue(), Config(model_dirs=[str(model_dir)])))
        await settle(pilot)
        await pilot.press("escape")
        await wait_for(pilot, lambda: len(app.results) == 2, "the picker closed")
    assert app.results == [model_dir / "mamba.gguf", None]


async def test_confirm_screen_enter_presses_the_focused_answer():
    """Enter presses the step asked about where it can be undone, Cancel where it cannot."""
    app = HostApp()
    async with app.run_test() as pilot:
        for keys in (["enter"], ["y"], ["escape"], ["tab", "enter"], ["tab", "tab", "enter"]):
            app.open(ConfirmScreen("Delete this branch (3 messages)? Ctrl+Z brings it back."))
            await pilot.pause()
            await pilot.press(*keys)
            await pilot.pause()
        app.open(ConfirmScreen("Delete? This cannot be undone.", yes_label="Delete it", enter_confirms=False))
        await pilot.pause()
        await pilot.press("enter")
        await pilot.pause()
        app.open(ConfirmScreen("Delete?", yes_label="Delete it", enter_confirms=False))
        await pilot.pause()
        await pilot.click("#dialog-yes")
        await pilot.pause()
    # enter lands on Delete; tab moves to Cancel, and tab tab wraps back to Delete.
    assert app.results == [True, True, False, False, True, False, True]


async def test_text_prompt_returns_the_text_or_none():
    app = HostApp()
    async with app.run_test() as pilot:
        prompt = TextPrompt("Rename session", "Old title")
        app.open(prompt)
        await pilot.pause()
        await pilot.press(*"New title", "enter")
        await pilot.pause()
        empty = TextPrompt("Rename session")
        app.open(empty)
        await pilot.pause()
        await pilot.press("enter")
        await pilot.pause()
        assert "Type something" in str(empty.query_one("#dialog-error", Static).render())
        await pilot.press("escape")
        await pilot.pause()
    assert app.results == ["New title", None]


@pytest.fixture
def branched_session(store, controller):
    """A session with two replies to one question, open in ``controller``."""
    session = store.create_session(title="Fork test")
    question = store.add_message(session.id, None, "user", "Pick a colour")
    store.add_message(session.id, question.id, "assistant", "Blue.")
    red = store.add_message(session.id, question.id, "assistant", "Red.")
    store.set_active_leaf(session.id, red.id)
    controller.open_session(session.id)
    return session.id


async def test_export_writes_markdown_and_json_to_the_default_paths(controller, branched_session, tmp_path,
                                                                   monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    app = HostApp()
    async with app.run_test(size=(100, 40)) as pilot:
        app.open(ExportScreen(controller, branched_session))
        await pilot.pause()
        await pilot.click("#dialog-yes")
        await settle(pilot)
        app.open(ExportScreen(controller, branched_session))
        await pilot.pause()
        await pilot.click("#format-json")
        await pilot.click("#dialog-yes")
        await settle(pilot)
    markdown = tmp_path / f"llamachat-{branched_session}.md"
    exported = tmp_path / f"llamachat-{branched_session}.json"
    assert app.results == [markdown, exported]
    text = markdown.read_text(encoding="utf-8")
    assert "Fork test" in text and "Red." in text and "Blue." not in text  # the branch only
    assert len(json.loads(exported.read_text(encoding="utf-8"))["messages"]) == 3
    assert markdown.stat().st_mode & 0o077 == 0


async def test_export_explains_problems_and_asks_before_replacing(controller, branched_session, tmp_path):
    app = HostApp()
    async with app.run_test(size=(100, 40)) as pilot:
        screen = ExportScreen(controller, branched_session)
        app.open(screen)
        await pilot.pause()
        path_input = screen.query_one("#export-path", Input)
        error = screen.query_one("#dialog-error", Static)
        path_input.value = str(tmp_path / "no-such-folder" / "chat.md")
        await pilot.click("#dialog-yes")
        await wait_for(pilot, lambda: "does not exist" in str(error.render()), "the missing folder named")
        assert app.results == []
        existing = tmp_path / "chat.md"
        existing.write_text("keep me", encoding="utf-8")
        path_input.value = str(existing)
        await pilot.click("#scope-tree")
        await wait_for(pilot, lambda: screen.whole_tree, "every branch chosen")  # before the next click
        # A button ignores clicks while it still shows the last press (Textual's 0.2 s
        # "-active" effect): the second Export waits for it to be released.
        export = screen.query_one("#dialog-yes", Button)
        await wait_for(pilot, lambda: not export.has_class("-active"), "the Export button released")
        await pilot.click("#dialog-yes")
        await wait_for(pilot, lambda: "already exists" in str(error.render()), "the existing file named")
        assert existing.read_text(encoding="utf-8") == "keep me"
        path_input.focus()
        await pilot.press("enter")  # the second "Export" (enter in the path field)
        await settle(pilot)
    assert app.results == [existing]
    assert "Blue." in existing.read_text(encoding="utf-8")  # every branch this time


def test_model_rows_of_one_name_are_told_apart_and_the_loaded_one_is_marked(tmp_path):
    from sessions.discovery import ModelCard
    from tui.screens.model_picker import row_names

    def card(path: str, name: str = "Gemma 3 270m") -> ModelCard:
        return ModelCard(path=tmp_path / path, name=name, file_size=1)

    cards = [card("a/gemma-q8.gguf"), card("a/gemma-q4.gguf"), card("b/gemma-q4.gguf"), card("a/llama.gguf", "Llama")]
    assert row_names(cards, loaded=tmp_path / "a" / "gemma-q4.gguf") == [
        "Gemma 3 270m · gemma-q8.gguf", "Gemma 3 270m · a/gemma-q4.gguf (loaded)",
        "Gemma 3 270m · b/gemma-q4.gguf", "Llama"]


async def test_model_picker_marks_the_loaded_model(model_dir):
    app = HostApp()
    async with app.run_test(size=(120, 36)) as pilot:
        picker = ModelPicker(ModelCatalogue(), Config(model_dirs=[str(model_dir)]), loaded=model_dir / "lfm2.gguf")
        app.open(picker)
        await settle(pilot)
        table = picker.query_one(DataTable)
        marked = [str(table.get_row(str(index))[0]) for index, _ in enumerate(picker.cards)]
        assert [name for name in marked if name.endswith("(loaded)")] == [
            marked[next(i for i, c in enumerate(picker.cards) if c.path.name == "lfm2.gguf")]]


def test_model_rows_of_one_name_say_their_quantisation_when_it_tells_them_apart(tmp_path):
    from sessions.discovery import ModelCard
    from tui.screens.model_picker import row_names

    def card(path: str, quant: str) -> ModelCard:
        return ModelCard(path=tmp_path / path, name="Gemma 3 270m", quantization=quant, file_size=1)

    assert row_names([card("a/g-q4.gguf", "Q4_K_M"), card("a/g-q8.gguf", "Q8_0")]) == [
        "Gemma 3 270m · Q4_K_M", "Gemma 3 270m · Q8_0"]
    assert row_names([card("a/g-q4.gguf", "Q4_K_M"), card("b/g-q4.gguf", "Q4_K_M"), card("a/g-q8.gguf", "Q8_0")]) == [
        "Gemma 3 270m · a/g-q4.gguf", "Gemma 3 270m · b/g-q4.gguf", "Gemma 3 270m · g-q8.gguf"]
    same = [card("x/a/g.gguf", "Q4_K_M"), card("y/a/g.gguf", "Q4_K_M")]
    assert row_names(same) == [f"Gemma 3 270m · {tmp_path}/x/a/g.gguf", f"Gemma 3 270m · {tmp_path}/y/a/g.gguf"]


async def test_model_picker_lists_the_models_of_saved_chats_and_downloads_first(model_dir, store, tmp_path):
    """A fresh config searches no folder of these models: the chats and the downloads alone
    bring them, the most recent first, wherever their files are."""
    from sessions.hub import remember_download

    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    shutil.copyfile(model_dir / "llama.gguf", elsewhere / "old.gguf")
    store.create_session(title="old chat", model_path=str(elsewhere / "old.gguf"), created_at=1000.0)
    store.create_session(title="newer chat", model_path=str(model_dir / "mamba.gguf"), created_at=2000.0)
    store.create_session(title="again", model_path=str(model_dir / "mamba.gguf"), created_at=1500.0)
    store.create_session(title="gone", model_path=str(tmp_path / "deleted.gguf"), created_at=3000.0)
    remember_download(model_dir / "lfm2.gguf", "org/lfm2-GGUF:Q4_K_M")
    app = HostApp()
    async with app.run_test(size=(120, 36)) as pilot:
        picker = ModelPicker(ModelCatalogue(store), Config(), loaded=model_dir / "mamba.gguf")
        app.open(picker)
        await settle(pilot)
        assert [card.path for card in picker.cards] == [model_dir / "lfm2.gguf", model_dir / "mamba.gguf",
                                                        elsewhere / "old.gguf"]
        assert str(picker.query_one("#picker-status", Static).render()).startswith("3 models found")
        table = picker.query_one(DataTable)
        names = [str(table.get_row(str(index))[0]) for index in range(3)]
        assert [name.endswith("(loaded)") for name in names] == [False, True, False]
        assert table.cursor_row == 3  # on the model loaded now: enter changes nothing
        await pilot.press("up")  # the first model, under the demo and download rows
        detail = str(picker.query_one("#model-detail", Static).render())
        assert str(model_dir / "lfm2.gguf") in detail and "found via a download by name" in detail
        await pilot.press("down")
        assert "found via a saved chat" in str(picker.query_one("#model-detail", Static).render())


async def test_model_picker_typing_filters_the_rows_and_enter_chooses_the_row_shown(model_dir):
    app = HostApp()
    async with app.run_test(size=(120, 36)) as pilot:
        picker = ModelPicker(ModelCatalogue(), Config(model_dirs=[str(model_dir)]))
        app.open(picker)
        await settle(pilot)
        await pilot.press(*"mamba")  # no Tab first: the box has the focus
        assert picker.typed == "mamba"
        (key,) = picker.shown_keys
        assert picker.cards[int(key)].path.name == "mamba.gguf"
        assert "1 row shown" in str(picker.query_one("#picker-status", Static).render())
        await pilot.press("enter")
        await wait_for(pilot, lambda: app.results, "the model chosen")
    assert app.results == [model_dir / "mamba.gguf"]


async def test_model_picker_a_typed_path_is_what_enter_loads_never_the_highlighted_row(model_dir):
    """The walk-through's steps: F5, type a path, Enter. The demo row was highlighted."""
    app = HostApp()
    async with app.run_test(size=(120, 36)) as pilot:
        picker = ModelPicker(ModelCatalogue(), Config(model_dirs=[str(model_dir)]))
        app.open(picker)
        await settle(pilot)
        assert picker.query_one(DataTable).cursor_row == 0  # the demo row, highlighted
        await pilot.press(*str(model_dir / "gemma3.gguf"))
        await pilot.press("enter")
        await wait_for(pilot, lambda: app.results, "the file chosen")
        assert app.results == [model_dir / "gemma3.gguf"]
        picker = ModelPicker(ModelCatalogue(), Config(model_dirs=[str(model_dir)]))
        app.open(picker)
        await settle(pilot)
        await pilot.press(*"nothing like it", "enter")
        status = picker.query_one("#picker-status", Static)
        assert "Nothing matches" in str(status.render()) and status.has_class("-error")
        assert app.screen is picker and len(app.results) == 1

