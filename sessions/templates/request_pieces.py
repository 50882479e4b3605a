"""A whole conversation sent by a client, rendered once and cut into one piece per message.

The app freezes each message's tokens when the message is added (``message_tokens``):
a template that rewrites history never changes tokens the model has seen. A client of
``llamachat serve`` sends the whole history with every request instead, and what the
template makes of that history *now* (earlier reasoning dropped, a system prompt dated
today, a continue nudge moved) is what that request asks the model to read. So the
request is rendered whole, as llama-server renders it, and that text is the truth.

To put it in the tree it is cut where the app cuts a branch into frozen pieces, so that
a served chat and a chat of the app hold the same tokens for the same messages:

- a reply's piece is its content alone: the reply header before it (the generation
  prompt, when the reply was written here) ends the piece of the message it answers, and
  its closing (the end-of-turn, which the model's cache never held) begins the next one;
- any other message's piece runs from the end of the previous content to the end of its
  own;
- the last piece takes the rest: its closing and the generation prompt, or, for a reply
  to go on from, nothing after its content (as llama-server's ``continue_final_message``).

Where contents start and end is found with markers. Every content is replaced by a
marker of its own and the conversation rendered once, which gives what the template
writes between contents; a content the template copies as it is sits where that says.
A content the template changes (``trim``, reasoning split off a reply) is asked about
alone: with it replaced by a marker, what precedes the marker must be how the request's
rendering begins and what follows it how it ends. When even that fails (a template that
renders a message's surroundings from its text) the request is cut as the app cuts a
branch, each piece rendered on its own, and ``RequestPieces.exact`` says so.
"""

from __future__ import annotations

import secrets
from collections.abc import Sequence
from dataclasses import dataclass, replace

from sessions.templates.chat_template import ChatMessage, ChatTemplate, TemplateError
from sessions.templates.message_tokens import Tokenize, message_text_piece


@dataclass(frozen=True)
class RequestPieces:
    """The request's rendering, one text per message, and each text's tokens."""

    texts: list[str]
    tokens: list[list[int]]
    exact: bool
    """The pieces are the request's whole rendering, cut; False when the template could
    not be cut so and the pieces are the app's own, each rendered on its own."""

    @property
    def all_tokens(self) -> list[int]:
        return [token for piece in self.tokens for token in piece]


Span = tuple[int | None, int]
"""Where a content starts (None: not known) and ends in the request's rendering."""


def _marker() -> str:
    # As ``message_tokens``' sentinels: letters and digits only, nothing a template trims.
    return "LLAMACHATPIECE" + secrets.token_hex(12).upper()


def request_pieces(template: ChatTemplate, tokenize: Tokenize, messages: Sequence[ChatMessage], *,
                   continue_last: bool) -> RequestPieces:
    """Render ``messages`` as one request and cut it per message (see the module docstring).

    ``continue_last``: the last message is a reply to go on from (no generation prompt,
    its piece ends with its content). ``TemplateError`` when the template cannot render
    the conversation, or renders a message as nothing.
    """
    if not messages:
        raise TemplateError("the conversation has no messages")
    whole = template.render(messages, add_generation_prompt=not continue_last)
    spans = _content_spans(template, messages, whole, continue_last)
    cut = None if spans is None else _cut(messages, whole, spans, continue_last)
    texts = cut if cut is not None else _frozen_pieces(template, messages, continue_last)
    tokens = _tokenized(template, tokenize, texts)
    empty = next((index for index, piece in enumerate(tokens) if not piece), None)
    if empty is not None:
        raise TemplateError(f"{template.subject} renders message {empty + 1} of the conversation as nothing")
    return RequestPieces(texts, tokens, cut is not None)


def _cut(messages: Sequence[ChatMessage], whole: str, spans: list[Span], continue_last: bool) -> list[str] | None:
    """``whole`` cut at the boundaries of the module docstring (None: they do not grow)."""
    cuts: list[int] = []
    for index in range(len(messages) - 1):
        start_next = spans[index + 1][0]
        after_reply_header = messages[index + 1].role == "assistant" and start_next is not None
        cuts.append(start_next if after_reply_header and start_next is not None else spans[index][1])
    cuts.append(spans[-1][1] if continue_last else len(whole))
    starts = [0, *cuts[:-1]]
    if any(end <= start for start, end in zip(starts, cuts, strict=True)):
        return None
    return [whole[start:end] for start, end in zip(starts, cuts, strict=True)]


def _tokenized(template: ChatTemplate, tokenize: Tokenize, texts: list[str]) -> list[list[int]]:
    """Each piece's tokens; only the first may get a BOS, where the template wrote none."""
    bos = template.bos_token
    return [tokenize(text, index == 0 and not (bos and text.startswith(bos))) for index, text in enumerate(texts)]


def _content_spans(template: ChatTemplate, messages: Sequence[ChatMessage], whole: str,
                   continue_last: bool) -> list[Span] | None:
    """Where each content starts and ends in ``whole`` (None: the template cannot be cut so).

    One rendering with every content a marker gives what the template writes between
    contents; walking ``whole`` along it, a content found as it is, followed by what the
    template writes next, sits there. Any other (trimmed, split, left out) is asked of a
    rendering of its own (``_one_span``).
    """
    markers = [_marker() for _ in messages]
    probe = template.render([replace(m, content=marker) for m, marker in zip(messages, markers, strict=True)],
                            add_generation_prompt=not continue_last)
    between: list[str] = []
    at = 0
    for marker in markers:
        found = probe.find(marker, at)
        if found < 0 or probe.find(marker, found + len(marker)) >= 0:
            between = []  # left out, or written twice: every span from a rendering of its own
            break
        between.append(probe[at:found])
        at = found + len(marker)
    between.append(probe[at:])
    spans: list[Span] = []
    at = 0
    for index, message in enumerate(messages):
        span: Span | None = None
        if len(between) > index + 1 and whole.startswith(between[index], at):
            start = at + len(between[index])
            end = start + len(message.content)
            if whole.startswith(message.content, start) and whole.startswith(between[index + 1], end):
                span = (start, end)
        if span is None:
            span = _one_span(template, messages, index, whole, continue_last)
        if span is None or span[1] <= at:
            return None
        spans.append(span)
        at = span[1]
    return spans


def _one_span(template: ChatTemplate, messages: Sequence[ChatMessage], index: int, whole: str,
              continue_last: bool) -> Span | None:
    """Where message ``index``'s content sits in ``whole``: the rendering with a marker in
    its place must begin as ``whole`` does up to the marker (else its start is not known)
    and end as ``whole`` does after it."""
    marker = _marker()
    probe = template.render([*messages[:index], replace(messages[index], content=marker), *messages[index + 1:]],
                            add_generation_prompt=not continue_last)
    found = probe.rfind(marker)
    if found < 0 or probe.find(marker) != found:
        return None
    after = probe[found + len(marker):]
    if not whole.endswith(after):
        return None
    end = len(whole) - len(after)
    start = found if found <= end and whole.startswith(probe[:found]) else None
    return start, end


def _frozen_pieces(template: ChatTemplate, messages: Sequence[ChatMessage], continue_last: bool) -> list[str]:
    """The pieces as the app freezes them, message by message (``message_text_piece``)."""
    texts: list[str] = []
    last = len(messages) - 1
    for index, message in enumerate(messages):
        answered = (not continue_last) if index == last else None
        texts.append(message_text_piece(template, messages[:index], message, add_generation_prompt=answered))
    return texts
