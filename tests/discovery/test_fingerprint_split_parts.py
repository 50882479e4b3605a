"""A split model's fingerprint covers every part, not the first file alone.

llama.cpp loads parts 2..n from beside the first one, but the fingerprint hashed only the
file it was given. A later part replaced (another revision, a re-converted fine-tune of
the same shape, a repaired download) left the fingerprint as it was, so checkpoints of
the old weights were restored into the new ones. With the header in a part of its own
(``--no-tensor-first-split``) no weight at all was hashed.
"""

from __future__ import annotations

import shutil

from sessions.llama.fingerprint import model_fingerprint
from tests.gguf_support import split_copy

STORIES = "stories260K.gguf"


def _flip_last_weight_byte(path):
    data = bytearray(path.read_bytes())
    data[-40] ^= 0xFF
    path.write_bytes(bytes(data))


def test_a_change_in_a_later_part_changes_the_fingerprint(tmp_path, shared_dir):
    for small_first in (False, True):
        folder = tmp_path / f"small-{small_first}"
        folder.mkdir()
        parts = split_copy(shared_dir / "models" / STORIES, folder / "st.gguf", 20, small_first_shard=small_first)
        before = model_fingerprint(parts[0])
        assert model_fingerprint(parts[0]) == before  # stable
        moved = shutil.copytree(folder, tmp_path / f"moved-{small_first}")
        assert model_fingerprint(moved / parts[0].name) == before  # where the files are does not matter
        for part in moved.iterdir():
            part.rename(moved / part.name.replace("st-", "renamed-"))
        assert model_fingerprint(moved / parts[0].name.replace("st-", "renamed-")) == before  # nor their name
        _flip_last_weight_byte(parts[-1])
        assert model_fingerprint(parts[0]) != before


def test_a_single_file_keeps_the_fingerprint_it_had(tmp_path, shared_dir):
    """Existing checkpoints of single-file models stay valid: their identity is unchanged."""
    import hashlib

    path = shared_dir / "models" / STORIES
    data = path.read_bytes()
    old = hashlib.blake2b(f"gguf-sampled-1;{len(data)};".encode() + data, digest_size=20).hexdigest()
    assert model_fingerprint(path) == f"gguf-sampled-1:{old}"


def test_the_loaded_model_carries_the_fingerprint_of_every_part(tmp_path, shared_dir):
    from sessions.llama.model import LlamaModel

    parts = split_copy(shared_dir / "models" / STORIES, tmp_path / "st.gguf", 20, small_first_shard=True)
    model = LlamaModel(parts[0])
    try:
        assert model.info.fingerprint == model_fingerprint(parts[0])
        assert model.info.n_params == 292800
    finally:
        model.close()
    before = model.info.fingerprint
    _flip_last_weight_byte(parts[2])
    reopened = LlamaModel(parts[0])
    try:
        assert reopened.info.fingerprint != before
    finally:
        reopened.close()
