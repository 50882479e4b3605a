"""Everything checked before a model file reaches llama.cpp in this process.

llama.cpp ends the whole program (``GGML_ASSERT``, exit status 134) on some malformed
files instead of failing the load, which would take the app and the terminal down with
it. So before a load: the header checks of ``read_model_card`` (a partial download, a
layer count or a number llama.cpp aborts on, at the load or at the first decode), then
the vocabulary's tokens must all differ (llama.cpp asserts it), and last, for what no
header check can prove, a trial load without the tensor data in a child process
(``probe``); a file that passed is remembered, so each file is tried once.

The duplicate check needs every token string, which ``read_model_card`` (used for model
lists too) skips to stay fast: it runs here only. For a 262,144-token vocabulary it takes
about 0.1 s of CPU, against seconds for the load itself.
"""

from __future__ import annotations

from pathlib import Path

from sessions.discovery.gguf_header import ArrayInfo, GGUFHeader, ModelFileError, string_array
from sessions.discovery.model_card import ModelCard, card_and_header
from sessions.discovery.probe import probe_once

_checked: set[tuple[str, int, int, int, int]] = set()
"""Files whose tokens were found distinct in this process (a load after the app's check)."""


def check_before_load(path: Path | str) -> ModelCard:
    """The card of a file that is safe to hand to llama.cpp; ``ModelFileError`` otherwise."""
    path = Path(path).expanduser()
    card, header = card_and_header(path)
    if card.error:
        raise ModelFileError(f"{path.name}: {card.error}")
    if card.embedding:  # llama.cpp loads it, and the "reply" is noise from a model with no text head
        raise ModelFileError(f"{path.name}: an embedding model (it turns text into vectors), not a chat model")
    identity = _identity(path)
    if identity in _checked:
        return card
    duplicate = duplicate_token(path, header)
    if duplicate is not None:
        raise ModelFileError(f"{path.name}: invalid model file: the vocabulary holds the token {duplicate!r} "
                             "twice; llama.cpp would crash on it")
    problem = probe_once(path)
    if problem is not None:
        raise ModelFileError(f"{path.name}: {problem}")
    if identity is not None:
        _checked.add(identity)
    return card


def _identity(path: Path) -> tuple[str, int, int, int, int] | None:
    try:
        info = path.stat()
    except OSError:
        return None
    return str(path.resolve()), info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns


def duplicate_token(path: Path, header: GGUFHeader) -> str | None:
    """A token string that appears twice in the vocabulary of ``path``, or None."""
    tokens = header.metadata.get("tokenizer.ggml.tokens")
    if isinstance(tokens, ArrayInfo) and tokens.element_type == "string":
        raw = string_array(path, tokens, header.byte_order)
    elif isinstance(tokens, list):
        raw = [t.encode("utf-8", "surrogatepass") if isinstance(t, str) else repr(t).encode() for t in tokens]
    else:
        return None
    if len(set(raw)) == len(raw):
        return None
    seen: set[bytes] = set()
    for token in raw:
        if token in seen:
            return token.decode("utf-8", "replace")
        seen.add(token)
    return None
