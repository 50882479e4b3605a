"""Each message's tokens, computed once when the message is added and then frozen.

Many chat templates rewrite history: Qwen3 drops the ``<think>`` block of earlier replies,
Phi-3.5 adds end-of-text only after a final reply, gpt-oss ends a final reply with
``<|return|>`` but the same reply in history with ``<|end|>``, Mistral Small puts today's date
in a default system prompt. Re-rendering the whole conversation each turn would change
earlier tokens and miss every cache. So a branch's tokens are the concatenation of its
messages' frozen pieces, and a piece never depends on re-rendering earlier messages:

- the piece of message k is the text after the *end of the content* of message k-1, up to
  the end of message k's content; the template's closing of message k (end-of-turn) belongs
  to the next message, because the end-of-generation token that stopped a reply is not in
  the model's cache;
- a message the model answers (a user message) also takes the generation prompt;
- a message after such a one drops what that generation prompt already put in the cache.

The content ends are found with sentinels: the previous message's content is replaced by a
random marker, the template is rendered, and the text after the marker is what follows it.
Only the last few messages are rendered (with the first system message), so the cost of a
piece does not grow with the length of the conversation.
"""

from __future__ import annotations

import re
import secrets
from collections.abc import Callable, Sequence
from dataclasses import replace

from sessions.reasoning import prompt_opens_reasoning
from sessions.templates.chat_template import ChatMessage, ChatTemplate, TemplateError

Tokenize = Callable[[str, bool], list[int]]
"""``tokenize(text, add_bos)``: the model's tokenizer, parsing special tokens."""

HISTORY_WINDOW = 6
"""Messages before the new one that a piece is rendered with (more when needed to start at a
user message, plus a leading system message): enough for every template's look-back."""


def _marker() -> str:
    # Letters and digits only: no whitespace for ``trim`` to eat, nothing Jinja or a
    # tokenizer treats specially, and case-insensitive so ``upper``/``lower`` keep it findable.
    return "LLAMACHATSENTINEL" + secrets.token_hex(12).upper()


def _end_of_last(text: str, marker: str) -> int | None:
    matches = list(re.finditer(marker, text, re.IGNORECASE))
    return matches[-1].end() if matches else None


def _window(history: Sequence[ChatMessage]) -> list[ChatMessage]:
    start = max(0, len(history) - HISTORY_WINDOW)
    while start > 0 and history[start].role != "user":
        start -= 1
    head = [history[0]] if start > 0 and history[0].role == "system" else []
    return [*head, *history[start:]]


def _answered(message: ChatMessage, add_generation_prompt: bool | None) -> bool:
    return message.role == "user" if add_generation_prompt is None else add_generation_prompt


def _text_after(template: ChatTemplate, before: list[ChatMessage], new: ChatMessage,
                answered: bool, marker: str | None) -> str:
    """Render ``before + [new]``; the text after ``marker`` (or all) to the end of new's part."""
    # A system message is rendered with a user message after it, as it will be: some
    # templates refuse a conversation without a user message.
    after = [ChatMessage("user", _marker())] if new.role == "system" and not answered else []
    real = template.render([*before, new, *after], add_generation_prompt=answered)
    start = 0 if marker is None else _end_of_last(real, marker)
    if start is None:
        raise TemplateError("the chat template leaves out the text of earlier messages")
    text = real[start:]
    if answered:
        return text
    own = _marker()
    probe = template.render([*before, replace(new, content=own), *after],
                            add_generation_prompt=False)
    own_end = _end_of_last(probe, own)
    if own_end is None:
        return text  # the template leaves this message's text out
    closing = probe[own_end:]
    if text.endswith(closing):
        return text[: len(text) - len(closing)]
    # The template closes the message differently for this content: take its opening.
    probe_start = 0 if marker is None else _end_of_last(probe, marker) or 0
    return probe[probe_start: own_end - len(own)] + new.content


def generation_suffix(template: ChatTemplate, history: Sequence[ChatMessage]) -> str:
    """What the piece of ``history[-1]`` took beyond its own content when it was answered.

    That is the template's end-of-turn plus the generation prompt; the next message must
    not repeat it, since it is already in the model's cache.
    """
    if not history:
        return ""
    marker = _marker()
    window = _window(history)
    window[-1] = replace(window[-1], content=marker)
    real = template.render(window, add_generation_prompt=True)
    end = _end_of_last(real, marker)
    if end is None:
        raise TemplateError("the chat template leaves out the text of earlier messages")
    return real[end:]


def reply_opens_in_reasoning(template: ChatTemplate, history: Sequence[ChatMessage], *,
                             prompt: Sequence[int] | None = None, tokenize: Tokenize | None = None) -> bool:
    """Whether a reply to ``history`` (ending with the message it answers) begins inside a
    reasoning block that the generation prompt opened (``reasoning.prompt_opens_reasoning``).

    For display only: a template that cannot render the conversation opens nothing.

    With ``prompt``, the token ids the reply follows, and ``tokenize``, the answer is yes only
    when those ids end with the generation prompt rendered now. The question's ids, that
    prompt included, were frozen when it was first answered: under other template variables
    (``chat_template_kwargs`` changed since) or before ``enable_thinking`` was given at all,
    a reply regenerated or continued now follows the prompt of then, maybe a closed block,
    and its answer would be shown folded as reasoning. Opening nothing is the safe side: a
    ``</think>`` in the reply still folds what came before it (``ReasoningSplitter``).
    """
    try:
        suffix = generation_suffix(template, history)
    except TemplateError:
        return False
    if not prompt_opens_reasoning(suffix):
        return False
    if prompt is None or tokenize is None:
        return True
    tail = tokenize(suffix, False)
    return bool(tail) and list(prompt[-len(tail):]) == tail


def message_text_piece(template: ChatTemplate, history: Sequence[ChatMessage],
                       new: ChatMessage, *, prev_suffix: str | None = None,
                       add_generation_prompt: bool | None = None) -> str:
    """The text that message ``new`` adds after ``history``; see the module docstring.

    ``add_generation_prompt`` says whether the model will answer ``new`` (default: it is a
    user message). ``prev_suffix`` is what the previous piece took beyond its content; by
    default the generation suffix when the previous message is a user message, else nothing.
    Raises ``TemplateError`` when the template cannot render the conversation.
    """
    answered = _answered(new, add_generation_prompt)
    if not history:
        return _text_after(template, [], new, answered, None)
    if prev_suffix is None:
        prev_suffix = generation_suffix(template, history) if history[-1].role == "user" else ""
    marker = _marker()
    before = _window(history)
    before[-1] = replace(before[-1], content=marker)
    text = _text_after(template, before, new, answered, marker)
    if not prev_suffix or text.startswith(prev_suffix):
        return text[len(prev_suffix):]
    if new.role == "assistant":
        return new.content  # the template opens replies unlike its generation prompt
    return text  # the earlier generation prompt stays as an empty turn


def freeze_message_tokens(template: ChatTemplate, tokenize: Tokenize,
                          history: Sequence[ChatMessage], new: ChatMessage, *,
                          prev_suffix: str | None = None,
                          add_generation_prompt: bool | None = None) -> list[int]:
    """Token ids of ``new``'s piece, to be stored with the message and never recomputed.

    Only the first piece of a conversation may get a BOS token from the tokenizer, and
    only when the template has not written the BOS text itself.
    """
    text = message_text_piece(template, history, new, prev_suffix=prev_suffix,
                              add_generation_prompt=add_generation_prompt)
    bos = template.bos_token
    add_bos = not history and not (bos and text.startswith(bos))
    return tokenize(text, add_bos)
