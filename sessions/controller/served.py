"""A request of ``llamachat serve`` put into the tree of a served chat, and served chats kept.

A client sends the whole conversation with every request. It is rendered once with the
model's template and cut into one piece per message (``templates.request_pieces``);
the pieces' tokens are the truth for that request. Its chat is the served chat that
holds the longest run of those messages from the top, each with the same role and the
same tokens for the model (``SessionStore.matching_messages``): they are reused as they
are, and the first message that differs starts a new branch, under the last one that
matched, with the request's own tokens frozen for it. A conversation whose first message
no served chat holds starts a served chat of its own. So a swipe finds its question
stored and answers it again, an edited early turn branches where it was edited, and a
client that rewrites earlier text (reasoning stripped, a continue nudge moved) branches
at the first message that renders differently; the engine then restores the longest
prefix it holds checkpoints for and evaluates only the rest.

A message a client sends as the model's (a reply it rewrote, or wrote itself) is stored
as a reply written by hand: no sampled tokens, its text's rendering decoded in a batch,
as an edited reply of the app is.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from sessions.controller.continuation import CAN_CONTINUE
from sessions.controller.conversation import Conversation, SessionDraft
from sessions.controller.open_chat import OpenChat
from sessions.controller.reply_turn import ReplyTurns
from sessions.errors import ContextOverflow, ControllerError, TurnTaken
from sessions.store import HeadMoved, SessionStore
from sessions.templates.chat_template import ChatMessage
from sessions.templates.request_pieces import RequestPieces, request_pieces
from sessions.tree import Message, Role

if TYPE_CHECKING:
    from sessions.engine.protocol import ChatEngine

PLACE_TRIES = 3
"""Times a request is placed again when another process changed its chat meanwhile."""


@dataclass(frozen=True)
class ServedMessage:
    """One message of a request, as the client sent it."""

    role: Role
    text: str


@dataclass(frozen=True)
class PlacedRequest:
    """Where a request went: its chat, the message a reply follows, and what was reused."""

    session_id: int
    last: Message
    """The request's last message: the one answered, or the reply gone on from."""
    prompt_tokens: int
    """The tokens of the whole request, as the model reads them."""
    last_tokens: int
    """The tokens of the last message's piece (for a reply gone on from: what it had)."""
    reused: int
    """The request's messages found stored (from the top); the others were added."""
    exact: bool
    """The pieces are the request's whole rendering (``RequestPieces.exact``)."""
    continues: bool = False
    """The last message is a reply to go on from (``continue_reply``), not a question."""


def render_request(engine: ChatEngine, messages: Sequence[ServedMessage], *, continue_last: bool) -> RequestPieces:
    """The request rendered by the loaded model's template and cut per message."""
    chat = [ChatMessage(m.role, m.text) for m in messages]
    return request_pieces(engine.template, engine.tokenize, chat, continue_last=continue_last)


def longest_stored(store: SessionStore, fingerprint: str, messages: Sequence[ServedMessage],
                   pieces: RequestPieces, *, continue_last: bool) -> list[Message]:
    """The stored messages that begin the request, root first, in the served chat that
    holds the most of them (the one changed last, of several that hold as many).

    A reply to go on from is taken as stored only if it can be gone on from: one written
    by hand, or cut at its length or stopped (``continuation``).
    """
    best: list[Message] = []
    for top in store.matching_messages(fingerprint, None, messages[0].role, pieces.tokens[0]):
        path = [top]
        while len(path) < len(messages):
            k = len(path)
            found = store.matching_messages(fingerprint, path[-1].id, messages[k].role, pieces.tokens[k])
            if not found:
                break
            path.append(found[0])
        if continue_last and len(path) == len(messages) and not _continuable(path[-1]):
            path.pop()
        if len(path) > len(best):
            best = path
    return best


def _check_room(tokens: int, n_ctx: int) -> None:
    """Refuse a request that leaves no room for a reply before anything of it is stored."""
    if tokens >= n_ctx:
        raise ContextOverflow(f"the request is {tokens:,} tokens long and the context holds {n_ctx:,}",
                              tokens=tokens, n_ctx=n_ctx)


def _continuable(reply: Message) -> bool:
    return reply.stats is None or reply.stats.stop_reason in CAN_CONTINUE


def place_request(chat: OpenChat, turns: ReplyTurns, engine: ChatEngine, messages: Sequence[ServedMessage], *,
                  continue_last: bool, wait_turn: Callable[[], bool]) -> PlacedRequest:
    """Open the served chat of ``messages`` (or start one) and add what it lacks; the
    request's last message becomes the head. The chat's turn is taken first, waiting
    while another process writes a reply there (``wait_turn`` says when to give up)."""
    if not messages:
        raise ControllerError("the request has no messages")
    if continue_last and messages[-1].role != "assistant":
        raise ControllerError("only a reply can be gone on from")
    pieces = render_request(engine, messages, continue_last=continue_last)
    _check_room(len(pieces.all_tokens), engine.n_ctx)
    fingerprint = engine.info.fingerprint
    for attempt in range(PLACE_TRIES):
        found = longest_stored(chat.store, fingerprint, messages, pieces, continue_last=continue_last)
        try:
            last = _place(chat, turns, engine, messages, pieces, found, wait_turn)
        except HeadMoved:
            if attempt == PLACE_TRIES - 1:
                raise
            continue
        if last is not None:
            return PlacedRequest(last.session_id, last, len(pieces.all_tokens), len(pieces.tokens[-1]),
                                 len(found), pieces.exact, continue_last)
    raise ControllerError("the served chat kept changing in another window while the request was placed")


def _place(chat: OpenChat, turns: ReplyTurns, engine: ChatEngine, messages: Sequence[ServedMessage],
           pieces: RequestPieces, found: list[Message], wait_turn: Callable[[], bool]) -> Message | None:
    """Place the request after ``found`` (None: a message found was deleted meanwhile)."""
    info = engine.info
    tokens = {info.fingerprint: pieces.tokens[0]}
    if not found:  # a chat of its own, saved with its first message
        draft = SessionDraft(model_path=str(info.path), model_fingerprint=info.fingerprint, served=True)
        with chat.lock:
            chat.conversation = conversation = Conversation(chat.store, None, draft=draft)
            first = conversation.append(messages[0].role, messages[0].text, parent_id=None, tokens=tokens)
        turns.take(first.session_id)  # no other process can be answering in it yet
        return _add(chat, turns, conversation, info.fingerprint, messages, pieces, [first])
    session_id = found[0].session_id
    with chat.lock:
        chat.conversation = conversation = Conversation(chat.store, session_id)
    if not turns.take(session_id, wait=True, should_stop=wait_turn):
        raise TurnTaken(session_id)
    with chat.lock:
        conversation.reload()
        if any(message.id not in conversation.tree for message in found):
            turns.release(session_id)
            return None
    return _add(chat, turns, conversation, info.fingerprint, messages, pieces, found)


def _add(chat: OpenChat, turns: ReplyTurns, conversation: Conversation, fingerprint: str,
         messages: Sequence[ServedMessage], pieces: RequestPieces, found: list[Message]) -> Message:
    """Add the messages after ``found`` with their pieces' tokens; the last becomes the head.
    The turn taken is let go if that fails."""
    try:
        with chat.lock:
            if len(found) == len(messages):
                return conversation.rewind(found[-1].id)
            added = found[-1]
            for message, tokens in zip(messages[len(found):], pieces.tokens[len(found):], strict=True):
                added = conversation.append(message.role, message.text, parent_id=added.id,
                                            tokens={fingerprint: tokens})
            return added
    except BaseException:
        turns.release(conversation.session_id)
        raise


def place_prompt(chat: OpenChat, turns: ReplyTurns, engine: ChatEngine, prompt: str | Sequence[int], *,
                 wait_turn: Callable[[], bool]) -> PlacedRequest:
    """A raw prompt of ``/v1/completions`` (text, tokenized with the model's BOS, or token
    ids) placed as ``place_request`` places a conversation.

    A raw prompt has no messages: it is cut along the longest run of stored messages whose
    tokens begin it, and what is left becomes one message of the user's, answered by the
    completion. A prompt that is a stored run exactly is answered again at a message of
    the user's, and gone on from at a reply that can be (one cut at its length, or
    stopped); after any other reply, that reply's tokens are taken as the user's text.
    """
    tokens = list(prompt) if not isinstance(prompt, str) else engine.tokenize(prompt, True)
    if not tokens:
        raise ControllerError("the prompt is empty")
    _check_room(len(tokens), engine.n_ctx)
    if max(tokens) >= engine.info.n_vocab:
        raise ControllerError(f"the prompt holds token {max(tokens)}, outside the model's "
                              f"{engine.info.n_vocab:,}-token vocabulary")
    fingerprint = engine.info.fingerprint
    for attempt in range(PLACE_TRIES):
        found: list[Message] = []
        at = 0
        lengths: list[int] = []
        while at < len(tokens):
            under = store_prefix(chat.store, fingerprint, found, tokens[at:])
            if under is None:
                break
            message, length = under
            found.append(message)
            lengths.append(length)
            at += length
        continues = at == len(tokens) and bool(found) and found[-1].role == "assistant"
        if continues and not _continuable(found[-1]):
            at -= lengths.pop()
            found.pop()
            continues = False
        rest = tokens[at:]
        pieces = RequestPieces([""] * len(found) + ([engine.detokenize(rest)] if rest else []),
                               [tokens[sum(lengths[:k]):sum(lengths[:k + 1])] for k in range(len(found))]
                               + ([rest] if rest else []), True)
        messages = [ServedMessage(m.role, m.text) for m in found] + (
            [ServedMessage("user", pieces.texts[-1])] if rest else [])
        try:
            last = _place(chat, turns, engine, messages, pieces, found, wait_turn)
        except HeadMoved:
            if attempt == PLACE_TRIES - 1:
                raise
            continue
        if last is not None:
            return PlacedRequest(last.session_id, last, len(tokens), len(pieces.tokens[-1]), len(found), True,
                                 continues)
    raise ControllerError("the served chat kept changing in another window while the request was placed")


def store_prefix(store: SessionStore, fingerprint: str, found: list[Message],
                 rest: Sequence[int]) -> tuple[Message, int] | None:
    """The stored message after ``found`` whose tokens begin ``rest`` (the longest), with
    how many tokens it holds; None when none does."""
    parent = found[-1].id if found else None
    for message in store.prefix_messages(fingerprint, parent, rest):
        tokens = store.get_tokens(message.id, fingerprint)
        if tokens:
            return message, len(tokens)
    return None


def served_to_clean(store: SessionStore, keep: int | None, max_age: float | None,
                    now: float | None = None) -> list[int]:
    """The served chats to delete: those unchanged for longer than ``max_age`` seconds, and
    the least recently changed beyond the ``keep`` most recent (None: no such limit)."""
    chats = store.served_sessions()  # least recently changed first
    now = time.time() if now is None else now
    old = {session_id for session_id, changed in chats if max_age is not None and now - changed > max_age}
    beyond = {session_id for session_id, _ in chats[:max(0, len(chats) - keep)]} if keep is not None else set()
    return [session_id for session_id, _ in chats if session_id in old | beyond]
