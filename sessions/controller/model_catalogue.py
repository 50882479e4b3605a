"""The models there are to choose from: those found on disk, those saved chats used and
those fetched by name, one file described, the demo model, and models fetched from the Hub.

The app's model picker and ``llamachat ask --demo`` reach them through the controller
(``SessionController.models``), so the demo model is made in this one place whoever asks
for it. None of this touches the open chat or the loaded model, so it needs neither of
the controller's locks. All of it blocks (discovery reads the header of every file it
finds, the demo model is written on first use, a download takes minutes): the app runs
it in thread workers.
"""

from __future__ import annotations

from pathlib import Path

from sessions.discovery import ModelCard, discover_models, read_model_card
from sessions.errors import ControllerError
from sessions.hub import HubModel, ProgressCallback, fetch_model, recent_downloads, search_models
from sessions.store import SessionStore, StoreError

DEMO_ARCH = "llama"
DEMO_SIZE = "tiny"
"""The demo model: a tiny llama with random weights (``sessions.synth``), made in seconds."""
CHAT_SOURCE = "a saved chat"
DOWNLOAD_SOURCE = "a download by name"


class ModelCatalogue:
    """The model files the user can choose from, and the demo model."""

    def __init__(self, store: SessionStore | None = None) -> None:
        self._store = store
        """Where the models of saved chats are read (None: no chats to remember)."""

    def discover(self, config: object | None = None) -> list[ModelCard]:
        """Every model in the folders ``config`` names, the usual download caches and its
        ``model``; unusable files are listed with the reason (``discover_models``). The
        models used by saved chats and those fetched by name come first, the most recent
        first, wherever their files are; the others follow by name."""
        remembered = self.remembered()
        cards = discover_models(config, also=remembered)
        rank = {_real(path): index for index, (path, _source) in enumerate(remembered)}
        return sorted(cards, key=lambda card: rank.get(_real(card.path), len(rank)))

    def remembered(self) -> list[tuple[Path, str]]:
        """(file, how it is known) of the models saved chats used and those fetched by
        name, the most recent first; files that are gone are left out."""
        dated: list[tuple[float, Path, str]] = [(entry.at, entry.path, DOWNLOAD_SOURCE)
                                                 for entry in recent_downloads()]
        if self._store is not None:
            try:
                dated += [(at, Path(path), CHAT_SOURCE) for path, at in self._store.models_used()]
            except StoreError:
                pass  # the chats cannot be read now: the picker still lists the disk's models
        dated.sort(key=lambda entry: -entry[0])
        seen: set[Path] = set()
        found = []
        for _at, path, source in dated:
            real = _real(path)
            if real not in seen and path.is_file():
                seen.add(real)
                found.append((path, source))
        return found

    def read_card(self, path: Path) -> ModelCard:
        """What the header of ``path`` says; ``ModelFileError`` when it is not a model file."""
        return read_model_card(path)

    def download(self, name: str, progress: ProgressCallback | None = None) -> Path:
        """Fetch ``user/repo[:quant]`` from the Hub (``sessions.hub.fetch_model``) and
        return the file to load; ``HubError`` (a ``ControllerError``) says why not."""
        return fetch_model(name, progress)

    def search_hub(self, query: str) -> list[HubModel]:
        """GGUF repositories on the Hub matching ``query``, the most downloaded first."""
        return search_models(query)

    def model_to_reopen(self, own: str | None, configured: str | None) -> Path | None:
        """The model a reopened chat loads, in the app and in ``ask`` alike: the chat's own
        while its file is there, else the configured one if its file is (None: neither)."""
        for candidate in (own, configured):
            if candidate and Path(candidate).expanduser().is_file():
                return Path(candidate).expanduser()
        return None

    def demo_model(self) -> Path:
        """The demo model's file, made on first use; ``ControllerError`` if it cannot be written."""
        from sessions import synth  # the model maker: only the demo needs it, not every ask's start

        try:
            return synth.make_model(DEMO_ARCH, DEMO_SIZE)
        except (synth.SynthError, OSError) as error:
            raise ControllerError(f"the demo model could not be made: {error}") from error


def _real(path: Path) -> Path:
    try:
        return path.resolve()
    except (OSError, RuntimeError):
        return path.absolute()
