"""The chat screen's decisions that need no widget: which message a key applies to,
what the next send does, and the words of its questions and notes.

Each tree action works on the *selected* message (moved with ctrl+up/down), or on the
last fitting message of the branch when nothing is selected, so the common case needs
no selection at all.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from sessions.api.chat import ChatSnapshot, LoadedModel, check_continuable
from sessions.api.library import Session, title_from_text
from sessions.errors import ControllerError
from sessions.tree import SAMPLED_BY_UNKNOWN, Message
from tui.widgets.message_view import code_blocks

if TYPE_CHECKING:
    from sessions.api.chat import RoutePlan

TRAILING_BLANK_LINES = re.compile(r"(?:\n[ \t]*)+\Z")

SLOW_SWITCH_TOKENS = 256
SLOW_SWITCH_SECONDS = 1.0


def sent_text(typed: str) -> str:
    """What a send stores of the text typed: without the blank lines at its end (the one
    an attached file's block leaves for the cursor, or an Enter too many). Nothing else
    changes, not even spaces at the end of a line of text."""
    return TRAILING_BLANK_LINES.sub("", typed)


@dataclass(frozen=True)
class InputMode:
    """What the next send does: a normal message, a new version of one, or a fork."""

    kind: Literal["send", "edit", "fork", "rewind"] = "send"
    target_id: int | None = None
    """The message edited, the reply forked after, or the head a rewind left (Esc goes back there)."""
    draft: str = ""
    """What was typed, unsent, when an edit replaced it in the input: it comes back after."""
    joins: bool = False
    """A rewind to a message of the user's: the next send joins it, as a new version."""

    @property
    def title(self) -> str | None:
        """The input box's title while the mode is special."""
        if self.kind == "rewind":
            return ("Rewound to your message: what you send next joins it as a new version, Esc goes back"
                    if self.joins else "Rewound: the next message goes on from here, Esc goes back")
        return {"edit": "Editing: Enter saves a new version (the original stays), Esc cancels",
                "fork": "Forking: the next message starts a new branch here, Esc cancels"}.get(self.kind)


def target(snapshot: ChatSnapshot | None, selected_id: int | None, *roles: str) -> Message | None:
    """The selected message, else the last message of the branch with one of ``roles``."""
    if snapshot is None:
        return None
    selected = snapshot.message(selected_id)
    if selected is not None:
        return selected if not roles or selected.role in roles else None
    return next((m for m in reversed(snapshot.path) if not roles or m.role in roles), None)


def step_selection(path_ids: list[int], current: int | None, delta: int) -> int | None:
    """The message ``delta`` steps from ``current`` (None: no selection, past the end)."""
    if not path_ids:
        return None
    if current not in path_ids:
        return path_ids[-1] if delta < 0 else None
    index = path_ids.index(current) + delta
    return None if index >= len(path_ids) else path_ids[max(0, index)]


def seconds_words(seconds: float) -> str:
    return "under 1 s" if seconds < 1 else f"{seconds:.0f} s" if seconds < 90 else f"{seconds / 60:.0f} min"


def about(seconds: float) -> str:
    """An estimate in words: ``under 1 s``, ``~5 s``, ``~3 min``."""
    words = seconds_words(seconds)
    return words if seconds < 1 else f"~{words}"


def switch_note(plan: RoutePlan) -> str | None:
    """A note when making a branch live will take noticeable time (None when it will not)."""
    if plan.tokens_to_evaluate <= SLOW_SWITCH_TOKENS and plan.estimate_seconds <= SLOW_SWITCH_SECONDS:
        return None
    return f"switching will evaluate {plan.tokens_to_evaluate:,} tokens ({about(plan.estimate_seconds)})"


def joined_note(stored: Message, typed: str) -> str:
    """What to say when a send did not store ``typed`` as a message of its own (``sessions.turns``)."""
    if stored.text.strip() == typed.strip():
        return "Asked again: your message above was still waiting for its answer."
    return ("Joined to your message above, which was still waiting for its answer "
            "(the earlier version stays: Alt+← pages back to it).")


def no_model_note(session: Session) -> str:
    """Why a reopened chat has no model to load by itself (the picker follows)."""
    if session.model_path and session.model_to_reopen is None:
        return (f"This chat was imported: its file names the model {session.model_path}, which is loaded "
                "only if you choose it. Choose a model for it.")
    return "The model of this chat is not on disk any more: choose one."


def continue_problem(message: Message | None) -> str | None:
    """Why ``message`` cannot be continued, in words (None: it can)."""
    if message is None:
        return "Select the reply to continue first (Ctrl+Up)."
    try:
        check_continuable(message)
    except ControllerError as error:
        return str(error)[:1].upper() + str(error)[1:] + "."
    return None


def continue_from_problem(message: Message, model: LoadedModel | None, continue_key: str) -> str | None:
    """Why Alt+G cannot go on from inside ``message`` (None: it can), said before the place
    is asked for: only the loaded model's own tokens can be cut between."""
    if message.stats is None:
        return f"This reply was written or edited by hand: {continue_key} goes on from its end."
    if model is not None and message.stats.sampled_by not in (model.fingerprint, SAMPLED_BY_UNKNOWN):
        return (f"This reply was written by another model: only a reply of the loaded model can be "
                f"continued from inside it ({continue_key} goes on from its end).")
    return None


def message_actions(message: Message) -> tuple[str, ...]:
    """The binding ids of the actions a selected message offers to the mouse, in order.

    The same keys work on any message and refuse, in words, what does not apply; a click
    is offered only where the gesture means something, so the row stays short.
    """
    actions = ["copy-message"]
    if message.role != "system":
        actions += ["edit", "regenerate"]
    if message.role == "assistant" and message.stats is not None and continue_problem(message) is None:
        actions.append("continue-reply")  # a reply cut or stopped (Ctrl+G also takes one written by hand)
    return (*actions, "delete-branch")


def plural(count: int, word: str) -> str:
    return f"{count} {word}{'s' if count != 1 else ''}"


DELETE_QUOTE_LIMIT = 40
"""Longest quote of the message a delete question names, in characters."""
ROLE_WORDS = {"user": "your message", "assistant": "the reply", "system": "the system prompt"}


def delete_question(message: Message, count: int) -> str:
    """The question before deleting ``message``; ``count``: it and everything below it.

    It names the message (who wrote it and how it begins), so a user who pressed the key
    with the focus somewhere unexpected sees what would go before it goes.
    """
    quote = title_from_text(message.text, DELETE_QUOTE_LIMIT) or "(empty)"
    named = f"{ROLE_WORDS.get(message.role, 'the message')} “{quote}”"
    below = f" and the {plural(count - 1, 'message')} below it on every branch" if count > 1 else ""
    return f"Delete {named}{below}? {plural(count, 'message')} will be deleted."


def trim_offer(snapshot: ChatSnapshot, error: Exception) -> tuple[str, bool]:
    """What to say when the branch no longer fits: ``(words, whether a trim can help)``.

    When nothing precedes the message but a system prompt there is nothing to leave out,
    so offering a shorter branch would only fail later.
    """
    words = str(error)
    words = words[:1].upper() + words[1:]
    earlier = [m for m in snapshot.path[:-1] if m.role != "system"]
    if not earlier:
        return (f"{words}: this message alone does not fit. Edit it (F2) to shorten it, "
                "or use a larger context (n_ctx in config.toml)."), False
    return (f"{words}. Continue in a new branch without the oldest turns? "
            "This branch stays as it is; you can page back to it."), True


def last_code_block(snapshot: ChatSnapshot | None, selected_id: int | None) -> str | None:
    """The last code block of the selected message, else of the newest message that has one."""
    if snapshot is None:
        return None
    selected = snapshot.message(selected_id)
    candidates = [selected] if selected is not None else list(reversed(snapshot.path))
    for message in candidates:
        blocks = code_blocks(message.text)
        if blocks:
            return blocks[-1]
    return None
