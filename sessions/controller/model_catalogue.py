"""The models there are to choose from: those found on disk, one file described, the demo model.

The app's model picker and ``llamachat ask --demo`` reach them through the controller
(``SessionController.models``), so the demo model is made in this one place whoever asks
for it. None of this touches the open chat or the loaded model, so it needs neither of
the controller's locks. All of it blocks (discovery reads the header of every file it
finds, the demo model is written on first use): the app runs it in thread workers.
"""

from __future__ import annotations

from pathlib import Path

from sessions import synth
from sessions.discovery import ModelCard, discover_models, read_model_card
from sessions.errors import ControllerError

DEMO_ARCH = "llama"
DEMO_SIZE = "tiny"
"""The demo model: a tiny llama with random weights (``sessions.synth``), made in seconds."""


class ModelCatalogue:
    """The model files the user can choose from, and the demo model."""

    def discover(self, config: object | None = None) -> list[ModelCard]:
        """Every model in the folders ``config`` names, the usual download caches and its
        ``model``; unusable files are listed with the reason (``discover_models``)."""
        return discover_models(config)

    def read_card(self, path: Path) -> ModelCard:
        """What the header of ``path`` says; ``ModelFileError`` when it is not a model file."""
        return read_model_card(path)

    def model_to_reopen(self, own: str | None, configured: str | None) -> Path | None:
        """The model a reopened chat loads, in the app and in ``ask`` alike: the chat's own
        while its file is there, else the configured one if its file is (None: neither)."""
        for candidate in (own, configured):
            if candidate and Path(candidate).expanduser().is_file():
                return Path(candidate).expanduser()
        return None

    def demo_model(self) -> Path:
        """The demo model's file, made on first use; ``ControllerError`` if it cannot be written."""
        try:
            return synth.make_model(DEMO_ARCH, DEMO_SIZE)
        except (synth.SynthError, OSError) as error:
            raise ControllerError(f"the demo model could not be made: {error}") from error
