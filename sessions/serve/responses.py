"""The JSON the server answers with, shaped as OpenAI's API and llama-server shape it.

Besides OpenAI's fields, every completion carries llama-server's ``timings`` (``prompt_n``
tokens of the prompt evaluated in ``prompt_ms``, ``predicted_n`` generated in
``predicted_ms``; ``cache_n`` the rest of the prompt, restored or still live) and
``usage.prompt_tokens_details.cached_tokens``, so a client or a benchmark sees what a
request re-processed, and a ``llamachat`` object naming the chat and the messages the
reply was stored as.
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass
from typing import Any

from sessions.serve.writing import Choice, Written


@dataclass(frozen=True)
class Completion:
    """One response's identity: its id, time and model, the same in every chunk of a stream."""

    kind: str
    """``chat`` or ``text``."""
    model: str
    id: str
    created: int

    @classmethod
    def new(cls, kind: str, model: str) -> Completion:
        prefix = "chatcmpl" if kind == "chat" else "cmpl"
        return cls(kind, model, f"{prefix}-{uuid.uuid4().hex}", int(time.time()))

    @property
    def chunk_object(self) -> str:
        return "chat.completion.chunk" if self.kind == "chat" else "text_completion"

    def _head(self, obj: str) -> dict[str, Any]:
        return {"id": self.id, "object": obj, "created": self.created, "model": self.model,
                "system_fingerprint": "llamachat"}

    def whole(self, written: Written) -> dict[str, Any]:
        """The response of a request that does not stream."""
        obj = "chat.completion" if self.kind == "chat" else "text_completion"
        return {**self._head(obj), "choices": [self._choice(choice) for choice in written.choices],
                "usage": usage(written), "timings": timings(written), "llamachat": stored(written)}

    def _choice(self, choice: Choice) -> dict[str, Any]:
        if self.kind == "chat":
            return {"index": choice.index, "message": {"role": "assistant", "content": choice.text},
                    "logprobs": None, "finish_reason": choice.finish_reason}
        return {"index": choice.index, "text": choice.text, "logprobs": None, "finish_reason": choice.finish_reason}

    def opening(self, count: int) -> dict[str, Any] | None:
        """The first chunk of a chat stream: each choice's role (a text stream has none)."""
        if self.kind != "chat":
            return None
        return {**self._head(self.chunk_object), "choices": [
            {"index": index, "delta": {"role": "assistant", "content": ""}, "logprobs": None, "finish_reason": None}
            for index in range(count)]}

    def text_chunk(self, index: int, text: str) -> dict[str, Any]:
        if self.kind == "chat":
            choice = {"index": index, "delta": {"content": text}, "logprobs": None, "finish_reason": None}
        else:
            choice = {"index": index, "text": text, "logprobs": None, "finish_reason": None}
        return {**self._head(self.chunk_object), "choices": [choice]}

    def closing(self, written: Written, include_usage: bool) -> list[dict[str, Any]]:
        """The last chunks of a stream: each choice's finish reason (and the text held back
        while it might have begun a stop string), then the usage if asked for; the last
        chunk carries the timings."""
        chunks = []
        for choice in written.choices:
            if self.kind == "chat":
                entry = {"index": choice.index, "delta": {}, "logprobs": None, "finish_reason": choice.finish_reason}
            else:
                entry = {"index": choice.index, "text": "", "logprobs": None, "finish_reason": choice.finish_reason}
            chunks.append({**self._head(self.chunk_object), "choices": [entry]})
        if include_usage:
            chunks.append({**self._head(self.chunk_object), "choices": [], "usage": usage(written)})
        chunks[-1]["timings"] = timings(written)
        chunks[-1]["llamachat"] = stored(written)
        return chunks


def usage(written: Written) -> dict[str, Any]:
    return {"prompt_tokens": written.prompt_tokens, "completion_tokens": written.completion_tokens,
            "total_tokens": written.prompt_tokens + written.completion_tokens,
            "prompt_tokens_details": {"cached_tokens": written.cached_tokens}}


def timings(written: Written) -> dict[str, Any]:
    """llama-server's ``timings`` object, from what the controller measured."""
    prompt_s = written.prompt_ms / 1000
    predicted_s = written.predicted_ms / 1000
    return {
        "cache_n": written.cached_tokens,
        "prompt_n": written.prompt_n,
        "prompt_ms": round(written.prompt_ms, 3),
        "prompt_per_token_ms": round(written.prompt_ms / written.prompt_n, 3) if written.prompt_n else 0.0,
        "prompt_per_second": round(written.prompt_n / prompt_s, 3) if prompt_s > 0 else 0.0,
        "predicted_n": written.predicted_n,
        "predicted_ms": round(written.predicted_ms, 3),
        "predicted_per_token_ms": round(written.predicted_ms / written.predicted_n, 3) if written.predicted_n else 0.0,
        "predicted_per_second": round(written.predicted_n / predicted_s, 3) if predicted_s > 0 else 0.0,
    }


def stored(written: Written) -> dict[str, Any]:
    """Where the reply was stored: ``llamachat show SESSION`` shows it in its tree."""
    return {"session": written.session_id, "messages": [choice.message_id for choice in written.choices],
            "reused_messages": written.reused}
