"""A ``.gguf`` name that is a symbolic link loop must not take the model list down.

``Path.resolve`` (used to list a file reached by two names once) raises ``RuntimeError``,
not ``OSError``, on a loop before Python 3.13: one stray link in a model folder ended
``llamachat models`` in a traceback and left the model picker empty.
"""

from __future__ import annotations

from sessions.config import Config
from sessions.discovery import discover_models
from tests.gguf_support import make_gguf


def test_a_link_loop_is_listed_with_its_reason_beside_the_models(home, tmp_path):
    folder = tmp_path / "models"
    make_gguf(folder / "good.gguf", name="Good")
    (folder / "self.gguf").symlink_to("self.gguf")
    (folder / "ping.gguf").symlink_to("pong.gguf")
    (folder / "pong.gguf").symlink_to("ping.gguf")

    cards = discover_models(Config(model_dirs=[str(folder)]))

    by_file = {card.path.name: card for card in cards}
    assert set(by_file) == {"good.gguf", "self.gguf", "ping.gguf", "pong.gguf"}
    assert by_file["good.gguf"].readable
    for name in ("self.gguf", "ping.gguf", "pong.gguf"):
        assert "symbolic links" in by_file[name].error
