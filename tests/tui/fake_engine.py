"""A stand-in for ``LlamaChatEngine`` with the same shape: instant and deterministic.

UI tests need replies that stream in a few chunks, a prompt that reports progress, and
branch switches that restore what was seen before, without llama.cpp. Tokens are bytes
(one id per byte), the chat template is the real ChatML fallback, plans and prepare
results are the engine's own types (``sessions.engine.reports``), so the controller runs
unchanged on top of it.

Replies come from a script (``replies``), then from a numbered default. ``hold_after``
makes a reply stop after that many chunks and wait until it is cancelled, which is how
the tests stop a reply half-way without any sleep.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from sessions.checkpoints import prefix_hash
from sessions.engine.protocol import ChatEngine, EngineFactory
from sessions.engine.reports import Generated, LoadedModel, Prepared, ProgressFn, Rates, RoutePlan, Tier, WarmedAhead
from sessions.engine.settings import EngineSettings
from sessions.errors import BatchUnavailable, DecodeCancelled
from sessions.memory_kind import MemoryKind
from sessions.sampling import SamplingSettings
from sessions.stop_reason import StopReason
from sessions.templates.chat_template import ChatTemplate

HOLD_LIMIT_SECONDS = 90.0
"""A held reply gives up after this long, so a broken test fails instead of hanging; longer
than a test's wait for a condition (``helpers.WAIT_SECONDS``), so that no test passes by a
hold running out."""

FAKE_RATES = Rates(eval_per_token=1e-4, step_seconds=1e-4, measured=True)
"""The fake decodes nothing: every token it "evaluates" is priced alike, at 0.1 ms."""


def chunks(text: str) -> list[str]:
    """Words with their trailing spaces: how the fake streams a reply."""
    return re.findall(r"\S+\s*|\s+", text)


@dataclass
class FakeScript:
    """What the fake engines made by one factory will say and do."""

    replies: list[str] = field(default_factory=list)
    hold_after: int | None = None
    """Stop after this many chunks and wait for a cancel."""
    load_gate: threading.Event | None = None
    """When set, loading waits for this event (to test the screen before the model is ready)."""
    n_ctx: int = 4096
    prepare_gate: threading.Event | None = None
    """When set, reading a prompt waits for this event (to see the screen while it runs)."""
    progress_gate: threading.Event | None = None
    """When set, reading a prompt reports half its tokens done, then waits for this event or
    a stop (``DecodeCancelled``, as llama.cpp's abort flag ends a decode): the progress seen."""
    template: ChatTemplate | None = None
    """The chat template of the engines made (default: the ChatML fallback)."""
    warm_gate: threading.Event | None = None
    """When set, a warm-ahead waits for this event or its stop (to see one under way)."""
    versions_unavailable: bool = False
    """When set, several versions at once are refused (no room for the batch)."""
    tokens_per_second: float | None = None
    """When set, a reply streams its chunks at this pace, as a GPU writes (the streaming
    benchmark); ``streamed_at`` then holds when each chunk was handed over."""
    streamed_at: list[float] = field(default_factory=list)
    """``time.monotonic()`` as each chunk of a paced reply was streamed, in order."""
    made: int = 0

    def next_reply(self) -> str:
        self.made += 1
        if self.replies:
            return self.replies.pop(0)
        return f"Reply {self.made} from the fake model: alpha beta gamma."


class FakeEngine:
    """The ``ChatEngine`` protocol, in memory."""

    def __init__(self, path: Path, script: FakeScript, n_ctx: int = 4096) -> None:
        self.info = LoadedModel(
            path=Path(path), fingerprint="fake-" + Path(path).name, name="Fake Model 1B",
            architecture="fake", n_params=1_000_000, n_vocab=256, n_ctx_train=n_ctx, n_swa=0,
            kind=MemoryKind.PLAIN, chat_template=None, bos_text="", eos_text="", add_bos=False,
            size_bytes=1234,
        )
        self.template = script.template or ChatTemplate.load(None)
        self.n_ctx = n_ctx
        self.checkpoint_notice: str | None = None
        self.devices = ""
        self.attention_notice: str | None = None
        self.script = script
        self.live: list[int] = []
        self.saved: set[tuple[int, ...]] = set()
        self.on_disk: set[tuple[int, ...]] = set()
        """Saved prefixes the fake says are kept on disk (the others are in RAM)."""
        self._abort = threading.Event()
        self.closed = False
        self.sampled_with: list[SamplingSettings] = []
        """The settings of every reply written, in order."""
        self.batches: list[int] = []
        """The size of every batch of versions sampled, in order."""
        self.warms: list[tuple[list[int], WarmedAhead]] = []
        """Every warm-ahead: the branch it was for and what it did, in order."""
        self.warming = threading.Event()
        """Set while a warm-ahead runs."""
        self.warm_ended = threading.Event()
        """Set once a warm-ahead has ended."""

    def tokenize(self, text: str, add_bos: bool) -> list[int]:
        return list(text.encode("utf-8"))

    def detokenize(self, tokens: Sequence[int]) -> str:
        return bytes(tokens).decode("utf-8", "replace")

    def plan(self, target: Sequence[int], ends: Sequence[int], *, need_logits: bool = True,
             stepped: Sequence[bool] | None = None) -> RoutePlan:
        target = list(target)
        shared = next((i for i, (a, b) in enumerate(zip(self.live, target, strict=False)) if a != b),
                      min(len(self.live), len(target)))
        keep = max([0] + [end for end in ends if end <= shared])
        reach = keep
        for end in ends:
            if end > reach and tuple(target[:end]) in self.saved:
                reach = end
            elif end > reach:
                break
        return RoutePlan(keep=keep, evaluate_from=reach, target_len=len(target), tokens_restored=reach - keep,
                         estimate_seconds=(len(target) - reach) * 1e-4, rates=FAKE_RATES)

    def prepare(self, target: Sequence[int], ends: Sequence[int], stepped: Sequence[bool] | None = None,
                on_progress: ProgressFn | None = None, *, reply_follows: bool = False,
                need_logits: bool = True) -> Prepared:
        """Like the real one, minus the decoding (``stepped`` changes nothing here)."""
        plan = self.plan(target, ends)
        if self.script.prepare_gate is not None:
            self.script.prepare_gate.wait(HOLD_LIMIT_SECONDS)
        todo = plan.tokens_to_evaluate
        if on_progress and todo:
            on_progress(todo // 2, todo, 1000.0)
            gate, waited = self.script.progress_gate, time.monotonic()
            while gate is not None and not gate.wait(0.01) and time.monotonic() - waited < HOLD_LIMIT_SECONDS:
                if self._abort.is_set():
                    raise DecodeCancelled()
            on_progress(todo, todo, 1000.0)
        self.live = list(target)
        for end in ends:
            self.saved.add(tuple(self.live[:end]))
        return Prepared(np.zeros(4, dtype=np.float32), plan, plan.tokens_restored, todo, 0.001)

    def generate(self, logits: np.ndarray, settings: SamplingSettings, *, max_tokens: int,
                 on_text: Callable[[str], None] | None = None,
                 should_stop: Callable[[], bool] = lambda: False) -> Generated:
        start = time.perf_counter()
        self.sampled_with.append(settings)
        parts = chunks(self.script.next_reply())
        written: list[str] = []
        reason = StopReason.EOG
        pace, began = self.script.tokens_per_second, time.monotonic()
        for index, part in enumerate(parts):
            if self.script.hold_after is not None and index >= self.script.hold_after:
                self._held(should_stop)
            if pace is not None:
                self._abort.wait(max(0.0, began + index / pace - time.monotonic()))
            if should_stop():
                reason = StopReason.CANCELLED
                break
            if len("".join(written + [part]).encode("utf-8")) > max_tokens:
                reason = StopReason.LENGTH  # one token per byte: the next word would pass the limit
                break
            written.append(part)
            if pace is not None:
                self.script.streamed_at.append(time.monotonic())
            if on_text:
                on_text(part)
        text = "".join(written)
        tokens = list(text.encode("utf-8"))
        self.live.extend(tokens)
        self.saved.add(tuple(self.live))
        return Generated(tokens, text, reason, start, time.perf_counter() - start)

    def save_checkpoints(self) -> None:
        """Nothing to read out: the fake keeps its saved prefixes as it goes."""

    def generate_versions(self, logits: np.ndarray, settings: Sequence[SamplingSettings], *, max_tokens: int,
                          on_text: Callable[[int, str], None] | None = None,
                          should_stop: Callable[[], bool] = lambda: False) -> list[Generated]:
        """One scripted reply per settings, their words streamed in turns (a word of each,
        then the next of each), as a batch streams them; the live sequence stays. With
        ``versions_unavailable`` set, refuses as an engine without room for the batch does."""
        if self.script.versions_unavailable:
            raise BatchUnavailable("llama.cpp could not make a context for several versions at once (fake)")
        start = time.perf_counter()
        self.sampled_with.extend(settings)
        self.batches.append(len(settings))
        parts = [chunks(self.script.next_reply()) for _ in settings]
        written: list[list[str]] = [[] for _ in settings]
        reasons = [StopReason.EOG] * len(settings)
        going = set(range(len(settings)))
        for index in range(max(map(len, parts), default=0)):
            if self.script.hold_after is not None and index >= self.script.hold_after:
                self._held(should_stop)
            for k in sorted(going):
                if should_stop():
                    reasons[k] = StopReason.CANCELLED
                    going.discard(k)
                elif index >= len(parts[k]):
                    going.discard(k)
                elif len("".join(written[k] + [parts[k][index]]).encode("utf-8")) > max_tokens:
                    reasons[k] = StopReason.LENGTH
                    going.discard(k)
                else:
                    written[k].append(parts[k][index])
                    if on_text:
                        on_text(k, parts[k][index])
        texts = ["".join(words) for words in written]
        return [Generated(list(text.encode("utf-8")), text, reason, start, time.perf_counter() - start)
                for text, reason in zip(texts, reasons, strict=True)]

    def warm_ahead(self, target: Sequence[int], ends: Sequence[int], should_stop: Callable[[], bool], *,
                   planned: Callable[[], None] | None = None) -> WarmedAhead:
        """Moves the saved prefixes of ``target`` kept on disk to RAM, unless stopped first."""
        target = list(target)
        if planned is not None:
            planned()
        self.warming.set()
        try:
            gate, waited = self.script.warm_gate, time.monotonic()
            while gate is not None and not gate.wait(0.01) and not should_stop():
                if time.monotonic() - waited > HOLD_LIMIT_SECONDS:
                    break
            on_disk = [saved for saved in (tuple(target[:end]) for end in ends) if saved in self.on_disk]
            if should_stop():
                warmed = WarmedAhead(left=len(on_disk), stopped=True)
            else:
                self.on_disk.difference_update(on_disk)
                warmed = WarmedAhead(nbytes=sum(map(len, on_disk)), segments=len(on_disk))
            self.warms.append((target, warmed))
            return warmed
        finally:
            self.warming.clear()
            self.warm_ended.set()

    def saved_tiers(self, prefixes: Sequence[str]) -> list[Tier | None]:
        tiers: dict[str, Tier] = {prefix_hash(saved): "disk" if saved in self.on_disk else "ram"
                                  for saved in self.saved}
        return [tiers.get(prefix) for prefix in prefixes]

    def _held(self, should_stop: Callable[[], bool]) -> None:
        """Hold the reply (``hold_after``) until it is stopped, as a real engine looks at its
        stop between two tokens: a stop request, or the reply's own ``should_stop``."""
        waited = time.monotonic()
        while not self._abort.wait(0.01) and not should_stop():
            if time.monotonic() - waited > HOLD_LIMIT_SECONDS:
                return

    def request_abort(self) -> None:
        self._abort.set()

    def clear_abort(self) -> None:
        self._abort.clear()

    def close(self) -> None:
        self.closed = True


class FakeEngineFactory:
    """The controller's ``engine_factory``; keeps the engines it made."""

    def __init__(self, script: FakeScript | None = None) -> None:
        self.script = script or FakeScript()
        self.engines: list[FakeEngine] = []

    def __call__(self, path: Path, settings: EngineSettings, on_progress: Callable[[float], None]) -> FakeEngine:
        on_progress(0.5)
        if self.script.load_gate is not None:
            self.script.load_gate.wait(HOLD_LIMIT_SECONDS)
        on_progress(1.0)
        engine = FakeEngine(path, self.script, n_ctx=self.script.n_ctx)
        self.engines.append(engine)
        return engine


if TYPE_CHECKING:  # mypy (CI) checks that the fake keeps the shape the controller programs against
    _engine: ChatEngine = FakeEngine(Path(), FakeScript())
    _factory: EngineFactory = FakeEngineFactory()
