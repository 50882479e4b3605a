"""The trim job: a branch too long for the context continued in a new branch without its
oldest turns (the rules are ``sessions.controller.context_fit``'s)."""

from __future__ import annotations

from sessions.controller import chat_settings, context_fit
from sessions.controller.open_chat import OpenChat
from sessions.controller.reply_turn import ReplyTurns
from sessions.errors import ControllerError, GenerationCancelled
from sessions.sampling import SamplingSettings
from sessions.templates.chat_template import TemplateStopped
from sessions.tree import Message


def trim_branch(chat: OpenChat, turns: ReplyTurns, sampling: SamplingSettings, leaf_id: int | None,
                reserve: int | None) -> Message:
    """``SessionController.trim_to_fit``, run under the engine lock; tokenizes without the tree lock."""
    engine = chat.loaded()
    with chat.lock:
        conversation = chat.conv()
        limit = chat_settings.settings_of(conversation, sampling).sampling.max_tokens
        reserve = min(limit, engine.n_ctx // 4) if reserve is None else reserve
        path = chat.path(leaf_id)
        context_fit.check_trimmable(path)
    try:
        plan = context_fit.fit_branch(chat.store, engine, conversation.session_id, path, reserve=reserve)
    except TemplateStopped:  # stopped while the template rendered the turns to keep
        raise GenerationCancelled("stopped before anything was trimmed") from None
    with chat.lock, turns.asking(conversation.session_id):  # the reply follows; it ends the turn
        if chat.conv() is not conversation:
            raise ControllerError("another chat was opened meanwhile: nothing was trimmed")
        return context_fit.add_trimmed(conversation, engine, path, plan)
