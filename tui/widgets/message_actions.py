"""The row of clickable actions under the header of the selected message.

Only the selected message has one, so the chat stays calm. A click posts
``MessageActions.Chosen`` with the action of the key that does the same (``tui.bindings``):
the screen runs that action, so a click and its key share one code path, and each
tooltip names the key. The words are not focusable: Tab moves as it always did, and a
keyboard user has the keys.

The conversation view mounts only the messages near the screen, so a view comes and goes
as the chat scrolls; ``place_actions`` is called for every view the conversation view
marks, and gives the row to the selected one wherever and whenever it is mounted.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from rich.text import Text
from textual import events
from textual.containers import Horizontal
from textual.css.query import NoMatches
from textual.message import Message as WidgetMessage
from textual.widgets import Static

from tui.bindings import spec
from tui.widgets.message_view import MessageView

WORDS = {"copy-message": ("copy", "copy"), "edit": ("edit", "edit"), "regenerate": ("regenerate", "again"),
         "continue-reply": ("continue", "more"), "delete-branch": ("delete", "del")}
"""Each action's word on the row: as wide as it likes, and the compact one for a narrow chat."""
USER_WORDS = {"regenerate": ("answer again", "again")}
"""On a message of the user, regenerating writes another answer to it."""
TIPS = {"copy-message": "Copy the message", "edit": "Edit: a new version of the message (the original stays)",
        "regenerate": "Regenerate the reply (a new version)", "continue-reply": "Continue the reply",
        "delete-branch": "Delete the message and everything below it (asks first)"}
USER_TIPS = {"regenerate": "Answer this message again (a new version of the reply)"}
ARROWS_TIP = "‹ › page the versions of the message"
GAP = 2
"""Columns between two words of the row (one when it is compact)."""


def words_for(binding_id: str, role: str) -> tuple[str, str]:
    return (USER_WORDS if role == "user" else {}).get(binding_id, WORDS[binding_id])


def tip_for(binding_id: str, role: str, key: str) -> str:
    words = (USER_TIPS if role == "user" else {}).get(binding_id, TIPS[binding_id])
    return f"{words} ({key})" if key else words


class ActionLink(Static):
    """One word of the row; a click runs its action."""

    def __init__(self, binding_id: str, words: tuple[str, str], tip: str) -> None:
        super().__init__(Text(words[0]), classes="message-action")
        self.binding_id = binding_id
        self.words = words
        self.tooltip = tip

    def show_compact(self, compact: bool) -> None:
        self.update(Text(self.words[compact]))

    def on_click(self, event: events.Click) -> None:
        event.stop()  # not a click on the message: that would only select it again
        row = self.parent
        if isinstance(row, MessageActions):
            self.post_message(MessageActions.Chosen(row.message_id, spec(self.binding_id).action, self.binding_id))


class MessageActions(Horizontal):
    """The actions of the selected message, as words to click."""

    @dataclass
    class Chosen(WidgetMessage):
        """The user clicked an action of a message."""

        message_id: int
        action: str
        """The Textual action its key runs (``copy_message``, ``regenerate``...)."""
        binding_id: str

    DEFAULT_CSS = f"""
    MessageActions {{ height: 1; width: 1fr; }}
    MessageActions > .message-action {{
        width: auto; margin-right: {GAP}; color: $text-muted; text-style: underline;
    }}
    MessageActions.-compact > .message-action {{ margin-right: 1; }}
    MessageActions > .message-action:hover {{ color: $text; background: $accent 30%; }}
    """

    def __init__(self, message_id: int, role: str, actions: Sequence[str], keys: Mapping[str, str]) -> None:
        links = (ActionLink(action, words_for(action, role), tip_for(action, role, keys.get(action, "")))
                 for action in actions)
        super().__init__(*links, classes="message-actions")
        self.message_id = message_id
        self.actions = tuple(actions)
        self._wide = sum(len(words_for(b, role)[0]) for b in actions) + GAP * (len(actions) - 1)

    def on_resize(self, event: events.Resize) -> None:
        """Short words when the full ones would not fit the width."""
        compact = 0 < event.size.width < self._wide
        if compact != self.has_class("-compact"):
            self.set_class(compact, "-compact")
            for link in self.query(ActionLink):
                link.show_compact(compact)


def place_actions(view: MessageView, actions: Sequence[str], keys: Mapping[str, str]) -> None:
    """Give ``view`` a row of ``actions`` under its header (none: take its row away).

    ``keys``: how the footer writes the key of each action, for the tooltips.
    """
    row = next(iter(view.query_children(MessageActions)), None)
    message_id = view.message_id
    wanted = bool(actions) and message_id is not None
    if row is None and not wanted:
        return  # the common case: a message not selected, or the reply being written
    try:
        header = view.header
    except NoMatches:  # a view still being mounted: it is marked again once it is
        return
    arrows = f"{keys.get('sibling-previous', '')} {keys.get('sibling-next', '')}".strip()
    paged = wanted and view.position[1] > 1
    header.tooltip = (f"{ARROWS_TIP} ({arrows})" if arrows else ARROWS_TIP) if paged else None
    if row is not None and wanted and row.actions == tuple(actions) and row.message_id == message_id:
        return
    if row is not None:
        row.remove()
    if wanted and message_id is not None:
        view.mount(MessageActions(message_id, view.role, actions, keys), after=header)
