"""Hostile GGUF files: each must be one sentence in the model list, never a crash or a hang.

The model list reads the header of every ``.gguf`` file it finds and catches only
``ModelFileError``; anything else a file makes the reader raise ends the whole list (and
``llamachat models``). An array nested 3,000 levels deep raised ``RecursionError``, and a
split ``split.count`` of 2**40 had the list build 2**40 part names.
"""

from __future__ import annotations

import random
import struct
from pathlib import Path

import pytest

from sessions.config import Config
from sessions.discovery import ModelFileError, discover_models, gguf_header, read_gguf_header, read_model_card
from sessions.discovery.model_card import split_part_paths
from tests.gguf_support import make_gguf

ARRAY, UINT32, STRING = 9, 4, 8


def _string(text: str) -> bytes:
    data = text.encode()
    return struct.pack("<Q", len(data)) + data


def nested_array_file(path: Path, depth: int) -> Path:
    """A GGUF v3 file whose ``deep`` key is an array of arrays ``depth`` levels deep."""
    value = struct.pack("<IQ", ARRAY, 1) * (depth - 1) + struct.pack("<IQI", UINT32, 1, 7)
    kv = (_string("general.architecture") + struct.pack("<I", STRING) + _string("llama")
          + _string("deep") + struct.pack("<I", ARRAY) + value)
    path.write_bytes(b"GGUF" + struct.pack("<IQQ", 3, 0, 2) + kv)
    return path


# --- arrays of arrays ----------------------------------------------------------------


@pytest.mark.parametrize("depth", [2, 3_000, 200_000])
def test_an_array_of_arrays_is_a_corrupt_header(tmp_path, depth):
    path = nested_array_file(tmp_path / "deep.gguf", depth)
    with pytest.raises(ModelFileError, match=r"^deep\.gguf: corrupt GGUF header: the value of "
                       r"'deep' is an array of arrays, which llama\.cpp cannot read$"):
        read_gguf_header(path)


def test_a_plain_array_in_the_same_layout_still_reads(tmp_path):
    header = read_gguf_header(nested_array_file(tmp_path / "flat.gguf", 1))
    assert header.metadata == {"general.architecture": "llama", "deep": [7]}


# --- long strings ------------------------------------------------------------------------


@pytest.mark.parametrize("where", ["key", "value"])
def test_a_string_of_gigabytes_is_refused_unread(tmp_path, where):
    """A model file is gigabytes, so a metadata string claiming as much may really be there
    (a sparse file here): it is refused from its length, not copied into memory."""
    length = gguf_header.MAX_STRING_BYTES + 1
    path = tmp_path / "long.gguf"
    head = _string("general.architecture") + struct.pack("<I", STRING) + _string("llama")
    if where == "key":
        head += struct.pack("<Q", length)
    else:
        head += _string("general.description") + struct.pack("<IQ", STRING, length)
    with path.open("wb") as out:
        out.write(b"GGUF" + struct.pack("<IQQ", 3, 0, 2) + head)
        out.truncate(out.tell() + length + 4096)  # the string and more are there, as zeros
    what = "metadata key 2 of 2" if where == "key" else "the value of 'general.description'"
    with pytest.raises(ModelFileError, match=rf"^long\.gguf: corrupt GGUF header: {what} is a string of "
                       rf"{length:,} bytes; no model needs more than {length - 1:,}$"):
        read_gguf_header(path)


def test_a_vocabulary_token_of_gigabytes_is_refused_before_the_load(tmp_path):
    """A vocabulary is skipped by the header read and copied only by the load's check of its
    tokens (``string_array``), which must refuse such a token from its length too."""
    length = gguf_header.MAX_STRING_BYTES + 1
    count = gguf_header.KEEP_ARRAYS_UP_TO + 1  # long enough to be skipped, not read, by the header read
    path = tmp_path / "vocab.gguf"
    tokens = b"".join(_string(f"t{i}") for i in range(count - 1)) + struct.pack("<Q", length)
    with path.open("wb") as out:
        out.write(b"GGUF" + struct.pack("<IQQ", 3, 0, 2) + _string("general.architecture")
                  + struct.pack("<I", STRING) + _string("llama") + _string("tokenizer.ggml.tokens")
                  + struct.pack("<IIQ", ARRAY, STRING, count) + tokens)
        out.truncate(out.tell() + length + 4096)
    header = read_gguf_header(path)
    info = header.metadata["tokenizer.ggml.tokens"]
    assert isinstance(info, gguf_header.ArrayInfo) and info.length == count
    with pytest.raises(ModelFileError, match=rf"^vocab\.gguf: corrupt GGUF header: a string of {length:,} bytes "
                       rf"in an array; no model needs more than {length - 1:,}$"):
        gguf_header.string_array(path, info)


def test_a_long_string_within_the_limit_reads(tmp_path):
    text = "x" * 100_000
    header = read_gguf_header(make_gguf(tmp_path / "ok.gguf", extra={"general.description": text}))
    assert header.metadata["general.description"] == text


# --- split.count -----------------------------------------------------------------------


def test_a_huge_split_count_is_refused_at_once(tmp_path):
    path = make_gguf(tmp_path / "huge-00001-of-00002.gguf", extra={"split.count": 2**40})
    with pytest.raises(ModelFileError, match=r"^huge-00001-of-00002\.gguf: invalid split model: "
                       r"split\.count is 1099511627776 \(llama\.cpp allows 1 to 65,535 parts\)$"):
        read_model_card(path)


@pytest.mark.parametrize(("name", "values", "words"), [
    ("m-00001-of-00002.gguf", {"split.count": 3}, "split.count is 3, but the file name does not end "
     "in -NNNNN-of-00003.gguf"),
    ("m.gguf", {"split.count": 2}, "split.count is 2, but the file name does not end in -NNNNN-of-00002"),
    ("m-00001-of-00002.gguf", {"split.count": 2, "split.no": 5}, "split.no is 5, but the file name says part 1"),
    ("m-00001-of-00002.gguf", {"split.count": 0}, "split.count is 0 (llama.cpp allows 1 to 65,535 parts)"),
])
def test_a_split_count_that_disagrees_with_the_name_is_refused(tmp_path, name, values, words):
    path = make_gguf(tmp_path / name, extra=values)
    with pytest.raises(ModelFileError, match="invalid split model: ") as raised:
        read_model_card(path)
    assert words in str(raised.value)


def test_split_part_paths_refuses_a_forged_count(tmp_path):
    with pytest.raises(ModelFileError, match="split.count is 1099511627776"):
        split_part_paths(tmp_path / "x-00001-of-00002.gguf", 2**40)
    with pytest.raises(ModelFileError, match="split.count is 70000"):
        split_part_paths(tmp_path / "x.gguf", 70_000)
    assert len(split_part_paths(tmp_path / "x-00001-of-00002.gguf", 2)) == 2


# --- the model list ------------------------------------------------------------------


def test_the_model_list_shows_each_hostile_file_with_its_reason(home, tmp_path):
    folder = tmp_path / "models"
    folder.mkdir()
    make_gguf(folder / "good.gguf", name="Good")
    nested_array_file(folder / "deep.gguf", 3_000)
    make_gguf(folder / "huge-00001-of-00002.gguf", name="Huge", extra={"split.count": 2**40})
    make_gguf(folder / "late-00002-of-00003.gguf", name="Late", extra={"split.count": 2**40, "split.no": 1})

    cards = {card.path.name: card for card in discover_models(Config(model_dirs=[str(folder)]))}
    assert set(cards) == {"good.gguf", "deep.gguf", "huge-00001-of-00002.gguf", "late-00002-of-00003.gguf"}
    assert cards["good.gguf"].readable and cards["good.gguf"].name == "Good"
    assert "is an array of arrays" in cards["deep.gguf"].error
    for name in ("huge-00001-of-00002.gguf", "late-00002-of-00003.gguf"):
        assert "split.count is 1099511627776" in cards[name].error
        assert cards[name].split_count == 1


# --- nothing but ModelFileError ------------------------------------------------------


@pytest.mark.parametrize("error", [RecursionError(), MemoryError(), struct.error("bad"), ValueError("bad")])
def test_a_last_resort_error_becomes_a_model_file_error(tmp_path, monkeypatch, error):
    path = make_gguf(tmp_path / "m.gguf")

    def fail(*_):
        raise error

    monkeypatch.setattr(gguf_header, "_parse", fail)
    with pytest.raises(ModelFileError, match=r"^m\.gguf: (corrupt GGUF header|GGUF header too large)"):
        read_gguf_header(path)


def test_random_damage_to_a_header_is_only_ever_a_model_file_error(tmp_path):
    data = make_gguf(tmp_path / "source.gguf").read_bytes()
    header_end = read_gguf_header(tmp_path / "source.gguf").data_offset
    damaged = tmp_path / "damaged.gguf"
    rng = random.Random(1234)
    for _ in range(400):
        mutated = bytearray(data)
        for _ in range(rng.randint(1, 4)):
            at = rng.randrange(8, header_end)
            mutated[at] = rng.choice((0, 9, 0xFF, rng.randrange(256)))
        damaged.write_bytes(bytes(mutated))
        try:
            read_model_card(damaged)
        except ModelFileError:
            pass
