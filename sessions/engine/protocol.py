"""The engine as the session controller sees it: one model, one context, its checkpoints.

``SessionController`` programs against ``ChatEngine`` only, in the engine's own words
(``reports``): no type of the branch engine, the llama.cpp bindings or the checkpoint
store crosses it. ``LlamaChatEngine`` is the real one over llama.cpp; the UI tests drive
the controller with an in-memory fake of the same shape (a test compares the two
signatures, so the fake cannot drift). Importing this module loads no llama.cpp.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    import numpy as np

    from sessions.engine.reports import Generated, LoadedModel, Prepared, ProgressFn, RoutePlan, Tier, WarmedAhead
    from sessions.engine.settings import EngineSettings
    from sessions.sampling import SamplingSettings
    from sessions.templates.chat_template import ChatTemplate


class ChatEngine(Protocol):
    info: LoadedModel
    template: ChatTemplate
    n_ctx: int
    checkpoint_notice: str | None
    """Why this model runs without checkpoints although they are on, in one sentence
    (its saved states are laid out in a way the engine does not read); None when it has
    them, or when they are off by choice."""

    @property
    def devices(self) -> str:
        """The devices the model's layers are on, in a few words (``CPU``, ``CPU + CUDA0``,
        ``CPU + 2 RPC (127.0.0.1:50052, ...)``); empty when the engine cannot say."""
        ...

    @property
    def attention_notice(self) -> str | None:
        """What the user should know when the attention of some layers runs on another
        device than they are on (no kernel for it there), in plain words; None otherwise."""
        ...

    def tokenize(self, text: str, add_bos: bool) -> list[int]: ...

    def detokenize(self, tokens: Sequence[int]) -> str:
        """The text of ``tokens`` read as one run of bytes, as ``generate`` streams it.

        A reply cut inside a multi-byte character and continued later must be read whole:
        the bytes that complete the character are in the continuation's first token.
        """
        ...

    def plan(self, target: Sequence[int], ends: Sequence[int], *, need_logits: bool = True,
             stepped: Sequence[bool] | None = None) -> RoutePlan:
        """What making ``target`` live would cost (``stepped`` as ``prepare`` takes it; None:
        not known, and the plan may take a route ``prepare`` would not); no work is done."""
        ...

    def prepare(
        self,
        target: Sequence[int],
        ends: Sequence[int],
        stepped: Sequence[bool] | None = None,
        on_progress: ProgressFn | None = None,
        *,
        reply_follows: bool = False,
        need_logits: bool = True,
    ) -> Prepared:
        """Make ``target`` the live sequence (restore, then decode what is new); blocking.

        With ``reply_follows`` the checkpoints of what was decoded are read out after the
        reply (``generate``), so the first token does not wait for them. Without
        ``need_logits`` the result may have none (``logits`` None): a switch shows a
        branch and need not decode its last message again.
        """
        ...

    def generate(
        self,
        logits: np.ndarray,
        settings: SamplingSettings,
        *,
        max_tokens: int,
        on_text: Callable[[str], None] | None = None,
        should_stop: Callable[[], bool] = lambda: False,
    ) -> Generated:
        """Sample a reply after the live sequence; blocking. The checkpoints of the prompt
        and the reply are left to read out for ``save_checkpoints``."""
        ...

    def save_checkpoints(self) -> None:
        """Read out the checkpoints the last ``prepare`` and ``generate`` left, and keep them;
        blocking. Called once the reply is stored, so that nothing a checkpoint meets can
        cost the reply: a checkpoint that cannot be read is told through the checkpoint
        store's report and costs a recompute later. The next ``prepare`` reads out what
        is left otherwise."""
        ...

    def generate_versions(
        self,
        logits: np.ndarray,
        settings: Sequence[SamplingSettings],
        *,
        max_tokens: int,
        on_text: Callable[[int, str], None] | None = None,
        should_stop: Callable[[], bool] = lambda: False,
    ) -> list[Generated]:
        """One reply per ``settings`` after the live sequence, sampled in one batch, the
        live sequence left as it was; ``on_text`` gets each version's index with its
        text; blocking. ``sessions.errors.BatchUnavailable`` when no context for the
        batch can be made.

        The replies' last bits are not a reply's sampled alone: they are stored as replies
        not sampled alone (``GenerationStats.batch``), and each is then made live with
        ``prepare`` before anything is kept of it or goes on from it.
        """
        ...

    def warm_ahead(self, target: Sequence[int], ends: Sequence[int], should_stop: Callable[[], bool], *,
                   planned: Callable[[], None] | None = None) -> WarmedAhead:
        """Read the checkpoints a switch to ``target`` would restore from disk into the
        checkpoint store's RAM tier, root first, until ``should_stop`` says so; never
        touches the live context, and reads no more than fits beside the checkpoints of
        the branch shown; blocking.

        It needs the engine as a plan does (it plans against the live state), and the
        reads after the plan touch only the checkpoint store: an engine in this process
        calls ``planned`` between the two, so that the caller can let other engine
        calls in. An engine in another process does not (it takes one call at a time).
        """
        ...

    def saved_tiers(self, prefixes: Sequence[str]) -> list[Tier | None]:
        """Where the state after each token prefix with these hashes is checkpointed:
        ``"ram"``, ``"disk"`` or None (not saved), in order. One call for many prefixes,
        so an engine in another process answers a whole tree in one round trip."""
        ...

    def request_abort(self) -> None:
        """Make a running decode stop soon (any thread)."""
        ...

    def clear_abort(self) -> None: ...

    def close(self) -> None: ...


class EngineFactory(Protocol):
    """Makes an engine for a model file (blocking: it loads the model).

    The controller takes a factory rather than an engine so that it can load another
    model later, and so that tests can hand it a fake.
    """

    def __call__(self, path: Path, settings: EngineSettings, on_progress: Callable[[float], None]) -> ChatEngine: ...
