"""A split model whose first part holds only metadata is one model, not a vocabulary file.

``gguf-split --no-tensor-first-split`` (and ``convert_hf_to_gguf.py`` with the same
option) writes the whole header to part 1 and every tensor to the parts after it. The
model list took part 1 for a vocabulary-only file (no tensors) and hid it, then showed
each later part as an orphan "whose first part is missing", though it sits beside them.
"""

from __future__ import annotations

from sessions.config import Config
from sessions.discovery import discover_models, read_model_card
from tests.gguf_support import split_copy


def test_the_first_part_is_listed_once_for_every_part(home, tmp_path, shared_dir):
    folder = tmp_path / "models"
    folder.mkdir()
    parts = split_copy(shared_dir / "models" / "stories260K.gguf", folder / "stories.gguf", 20,
                       small_first_shard=True)
    assert len(parts) == 4
    assert read_model_card(parts[0]).tensor_count > 0

    cards = discover_models(Config(model_dirs=[str(folder)]))

    assert [card.path for card in cards] == [parts[0]]
    assert cards[0].readable and not cards[0].is_auxiliary
    assert cards[0].file_size == sum(part.stat().st_size for part in parts)
    assert cards[0].parameter_count == 292800  # what llama.cpp counts for stories260K


def test_a_split_vision_projector_stays_out_with_all_its_parts(home, tmp_path):
    from tests.gguf_support import make_gguf

    folder = tmp_path / "models"
    tensors = {f"v.blk.{i}.weight": ((4, 32), "F32") for i in range(5)}
    make_gguf(folder / "mmproj-big.gguf", arch="clip", model_type="mmproj", tensors=tensors,
              split_max_tensors=2)

    assert discover_models(Config(model_dirs=[str(folder)])) == []
    everything = discover_models(Config(model_dirs=[str(folder)]), include_auxiliary=True)
    assert [card.path.name for card in everything] == ["mmproj-big-00001-of-00003.gguf"]
