"""The chat screen's handlers for the core's events (posted from worker threads).

Model loading and prompt progress drive the progress bar; streamed text is written a few
times a second rather than per token; a finished reply updates the status bar.
"""

from __future__ import annotations

from tui import events

STREAM_INTERVAL = 1 / 12
"""Seconds between two updates of a reply being written."""


class CoreEvents:
    """Mixin for ``MainScreen``: it provides the widgets and ``refresh_view``."""

    def on_model_load_progressed(self, message: events.ModelLoadProgressed) -> None:
        self.progress.show_fraction(f"loading the model: {message.fraction:.0%}", message.fraction)

    def on_model_loaded(self, message: events.ModelLoaded) -> None:
        self.n_ctx = message.n_ctx
        self.status.set_model(message.name, message.kind)
        self.status.set_context(self.context_used(), message.n_ctx)
        self.progress.hide()

    def on_prompt_progressed(self, message: events.PromptProgressed) -> None:
        if message.total > 0 and message.done < message.total:
            self.progress.show_prompt(message.done, message.total, message.eta_seconds)
        else:
            self.progress.hide()

    def on_text_streamed(self, message: events.TextStreamed) -> None:
        """Show new reply text at most ``STREAM_INTERVAL`` apart (see ``flush_stream``)."""
        self.progress.hide()
        self._stream_source = message
        if self._stream_timer is None:
            self._stream_timer = self.set_timer(STREAM_INTERVAL, self.flush_stream)

    async def flush_stream(self) -> None:
        """Write what the reply streamed since the last flush.

        Redrawing for every token would keep the UI thread busy, and the engine thread
        needs the GIL between tokens: a few updates a second read just as smoothly.
        """
        self._stream_timer = None
        source, self._stream_source = self._stream_source, None
        text = source.take() if source is not None else ""
        view = self.conversation_view.reply_view
        if view is not None and text:
            await view.write(text)

    def drop_stream(self) -> None:
        """Forget unshown streamed text (the stored reply replaces it)."""
        if self._stream_timer is not None:
            self._stream_timer.stop()
            self._stream_timer = None
        if self._stream_source is not None:
            self._stream_source.take()
            self._stream_source = None

    async def on_reply_finished(self, message: events.ReplyFinished) -> None:
        self.drop_stream()
        view = self.conversation_view.reply_view
        if view is not None:
            await view.end_stream(message.message)
        stats = message.stats
        self.last_cost = (stats.tokens_restored, stats.tokens_evaluated)
        self.status.set_speed(stats.generation_tps)
        self.status.set_cost(stats.tokens_restored, stats.tokens_evaluated, stats.prompt_seconds)
        await self.refresh_view()
        self.status.set_context(self.context_used(), self.n_ctx)

    def on_notice_raised(self, message: events.NoticeRaised) -> None:
        self.notify(message.text, severity=message.level, markup=False)  # type: ignore[arg-type]
