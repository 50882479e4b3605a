"""A chat's own settings: its system prompt and how its replies are sampled.

Every session keeps its sampling settings (saved with it, used again when it is
reopened, by the app and by ``llamachat ask``); the config's ``[sampling]`` table only
gives the defaults of new chats. The system prompt is different in kind: it is a message,
the first of a branch, and its tokens are what the model's cache holds. Changing it
therefore never rewrites a branch: the new prompt starts a new branch from the root and
the old one stays, as an edit of any other message would.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from sessions.controller.conversation import Conversation
from sessions.sampling import SamplingSettings
from sessions.store import Session, SessionStore
from sessions.tree import Message

if TYPE_CHECKING:
    from sessions.templates.chat_template import ChatTemplate


@dataclass(frozen=True)
class ChatSettings:
    """What the settings dialog shows and edits for the open chat."""

    system_prompt: str | None
    """The system prompt of the branch shown (None: the branch has none)."""
    sampling: SamplingSettings


def template_words(template: ChatTemplate) -> str:
    """``the built-in Gemma template (the model has no chat template; ...)``."""
    return template.origin + (f" ({template.fallback_reason})" if template.fallback_reason else "")


def clean_prompt(text: str | None) -> str | None:
    """A system prompt as stored: None when there is nothing in it."""
    return text if text is not None and text.strip() else None


def settings_of(conversation: Conversation, default: SamplingSettings, session: Session | None = None) -> ChatSettings:
    """The settings the next reply of ``conversation`` will be written with (``session``: its
    record, when the caller has just read it)."""
    if conversation.draft is not None:
        return ChatSettings(conversation.draft.system_prompt, conversation.draft.sampling)
    session = session or conversation.session
    sampling = session.sampling if session is not None else default
    path = conversation.active_path()
    if path:
        prompt = path[0].text if path[0].role == "system" else None
    else:
        prompt = session.system_prompt if session is not None else None
    return ChatSettings(prompt, sampling)


def set_sampling(conversation: Conversation, store: SessionStore, sampling: SamplingSettings) -> None:
    """Keep ``sampling`` for the chat's next replies (saved with the session)."""
    if conversation.draft is not None:
        conversation.draft = replace(conversation.draft, sampling=sampling)
    else:
        store.update_session(_saved(conversation), sampling=sampling)


def set_system_prompt(conversation: Conversation, store: SessionStore, text: str | None) -> Message | None:
    """Start a branch from the root under the system prompt ``text`` (None: without one).

    Returns the new head: the new system message, or None when the new branch starts
    empty (no system prompt) or the chat is not saved yet. A branch that held nothing but
    its system prompt is replaced rather than kept: nothing was said under it. When
    ``text`` is already the prompt of the branch shown, nothing changes.
    """
    text = clean_prompt(text)
    if text == settings_of(conversation, SamplingSettings()).system_prompt:
        return conversation.head
    if conversation.draft is not None:
        conversation.draft = replace(conversation.draft, system_prompt=text)
        return None
    session_id = _saved(conversation)
    head = conversation.head
    store.update_session(session_id, system_prompt=text)
    if head is not None and head.role == "system" and not conversation.tree.children(head.id):
        conversation.delete_subtree(head.id)
    if text is None:
        conversation.leave_branch()
        return None
    return conversation.append("system", text, parent_id=None)


def _saved(conversation: Conversation) -> int:
    assert conversation.session_id is not None  # drafts are handled by the caller
    return conversation.session_id
