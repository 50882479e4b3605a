"""One line under the input: which model, how full the context is, and what the last
reply or branch switch cost.

The "restored X, evaluated Y" figure is the point of the whole program (a switch should
restore almost everything and evaluate almost nothing), so it is always on screen. Every
part is a ``rich.text.Text``: a model name from a GGUF file is untrusted too.
"""

from __future__ import annotations

import time

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Horizontal
from textual.widgets import Label

from tui.safe_text import inert


def context_text(used: int | None, n_ctx: int | None) -> Text:
    if not n_ctx:
        return Text("ctx –")
    shown = "?" if used is None else f"{used:,}"
    text = Text(f"ctx {shown}/{n_ctx:,}")
    if used is not None and used >= 0.9 * n_ctx:
        text.stylize("bold")
    return text


STREAMING_EVERY = 0.25
"""Seconds between two draws of a figure that follows the reply being written."""
NOTICEABLE_SECONDS = 1.0
"""A switch this long (taken or estimated) also shows its estimate, to compare."""


MODEL_LEAST = 8
"""Columns the model's name keeps at least (``min-width`` of its label)."""
NARROW = 100
"""Below this many columns the bar drops the reply speed and the word "tokens", so that
the cost of the last switch stays whole (at 80 columns it was cut to "(0")."""


def cost_text(restored: int, evaluated: int, seconds: float | None = None, estimate: float | None = None,
              kept: int = 0, *, short: bool = False) -> Text:
    """``restored 5,888 tokens, evaluated 142 (0.4 s)``; with ``kept``, the tokens used as they
    were in the context (``, kept 78``: after a fork, most of the reuse); with ``estimate``,
    for a switch someone waited for, what was predicted too (``4.8 s, est. 4.1 s``);
    ``short``: without the word ``tokens``."""
    unit = "" if short else " tokens"
    text = f"restored {restored:,}{unit}, evaluated {evaluated:,}" + (f", kept {kept:,}" if kept else "")
    if seconds is not None and estimate is not None and max(seconds, estimate) >= NOTICEABLE_SECONDS:
        text += f" ({seconds:.1f} s, est. {estimate:.1f} s)"
    elif seconds is not None:
        text += f" ({seconds:.1f} s)"
    return Text(text)


class StatusBar(Horizontal):
    """Model, context meter, speed of the last reply, cost of the last switch or reply."""

    DEFAULT_CSS = """
    StatusBar { height: 1; }
    StatusBar > Label { padding: 0 0 0 1; text-wrap: nowrap; }
    StatusBar > #status-model { width: 1fr; min-width: 8; text-overflow: ellipsis; }
    StatusBar > #status-note { max-width: 40%; text-overflow: ellipsis; }
    StatusBar > #status-last { text-overflow: ellipsis; }
    StatusBar.-narrow > #status-speed { display: none; }
    """

    def compose(self) -> ComposeResult:
        first = {"model": Text("no model"), "context": context_text(None, None), "speed": Text("– tok/s"),
                 "last": Text(""), "note": Text("")}
        self._shown.update((part, text.plain) for part, text in first.items())  # what _fit counts
        for part, text in first.items():
            label = Label(text, id=f"status-{part}")
            yield label.set_styles("display: none;") if part == "note" else label  # no padding while empty

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self._shown: dict[str, str] = {}
        """The plain text of each part as drawn: ``_fit`` gives the cost the columns they leave."""
        self._drawn_at: dict[str, float] = {}
        """When a figure of the reply being written was last drawn, by part."""
        self._cost: tuple[int, int, float | None, float | None, int] | None = None

    def on_resize(self) -> None:
        narrow = self.size.width < NARROW
        if narrow != self.has_class("-narrow"):
            self.set_class(narrow, "-narrow")
            if self._cost is not None:
                self.set_cost(*self._cost)
        self._fit()

    def _set(self, part: str, text: Text) -> None:
        if self._shown.get(part) == text.plain:
            return  # unchanged: no layout for nothing
        self._shown[part] = text.plain
        self.query_one(f"#status-{part}", Label).update(text)
        self._fit()

    def _due(self, part: str, streaming: bool) -> bool:
        """Whether a figure of the reply being written is to be drawn now: at most every
        ``STREAMING_EVERY`` (each is a layout of the bar, and a reply streams hundreds of
        pieces a second); any other figure at once."""
        if not streaming:
            self._drawn_at.pop(part, None)
            return True
        now = time.monotonic()
        if now - self._drawn_at.get(part, -STREAMING_EVERY) < STREAMING_EVERY:
            return False
        self._drawn_at[part] = now
        return True

    def _fit(self) -> None:
        """Give the last switch's cost the columns the other parts leave it, so a narrow bar
        cuts it with "…" rather than mid-word at the terminal's edge (labels do not shrink)."""
        width = self.size.width
        if not width:
            return
        used = MODEL_LEAST + 1 + len(self.text_of("context")) + 1
        if not self.has_class("-narrow"):
            used += len(self.text_of("speed")) + 1
        if self.text_of("note"):
            used += min(len(self.text_of("note")), int(width * 0.4)) + 1
        self.query_one("#status-last", Label).styles.max_width = max(width - used - 1, 4)

    def text_of(self, part: str) -> str:
        """The plain text currently shown in one part (``model``, ``context``...)."""
        return self._shown.get(part, "")

    def set_model(self, name: str, kind: str | None = None, devices: str = "") -> None:
        """The model's name, memory kind and devices; its chat template is forgotten until ``set_template``."""
        parts = [inert(name), *(part for part in (kind, inert(devices)) if part)]
        self._set("model", Text(" · ".join(parts)))
        self.set_template(None)

    def set_template(self, template: str | None) -> None:
        """Hovering the model tells which chat template it uses (None: no tooltip)."""
        # Text, never markup: a GGUF template can set its own fallback reason (``raise_exception``).
        self.query_one("#status-model", Label).tooltip = Text(f"Chat template: {inert(template)}") if template else None

    def set_context(self, used: int | None, n_ctx: int | None, *, streaming: bool = False) -> None:
        """How full the context is (``streaming``: while a reply grows it, drawn a few times a second)."""
        if self._due("context", streaming):
            self._set("context", context_text(used, n_ctx))

    def set_speed(self, tokens_per_second: float | None, *, streaming: bool = False) -> None:
        """The speed of the last reply; with ``streaming``, of the reply being written so far
        (``…``, drawn a few times a second)."""
        if not self._due("speed", streaming):
            return
        shown = "– tok/s" if not tokens_per_second else f"{tokens_per_second:.1f} tok/s"
        self._set("speed", Text(shown + ("…" if streaming and tokens_per_second else "")))

    def set_cost(self, restored: int, evaluated: int, seconds: float | None = None,
                 estimate: float | None = None, kept: int = 0) -> None:
        self._cost = (restored, evaluated, seconds, estimate, kept)
        self._set("last", cost_text(restored, evaluated, seconds, estimate, kept, short=self.has_class("-narrow")))

    def set_note(self, note: str) -> None:
        self._set("note", Text(inert(note)))
        self.query_one("#status-note", Label).display = bool(note)  # no padding taken while empty
