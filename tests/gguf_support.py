"""Small GGUF files written with the gguf package, and a private HOME, for discovery tests."""

from __future__ import annotations

from pathlib import Path

import pytest

gguf = pytest.importorskip("gguf")
np = pytest.importorskip("numpy")

TOOL_ENV = ("HF_HUB_CACHE", "HF_HOME", "XDG_CACHE_HOME", "LMSTUDIO_MODELS_DIR", "LLAMA_CACHE")


def make_gguf(path: Path, arch: str = "llama", *, name: str | None = "Tiny", ctx: int | None = 4096,
              file_type: int | None = None, sliding_window: int | None = None,
              chat_template: str | None = None, model_type: str | None = None,
              tensors: dict[str, tuple[tuple[int, ...], str]] | None = None,
              extra=None, endianess=None, split_max_tensors: int = 0) -> Path:
    """Write a small GGUF; ``tensors`` maps name to (shape as numpy sees it, ggml type)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    kwargs = {"split_max_tensors": split_max_tensors}
    if endianess is not None:
        kwargs["endianess"] = endianess
    writer = gguf.GGUFWriter(str(path), arch, **kwargs)
    if name:
        writer.add_name(name)
    if ctx is not None:
        writer.add_context_length(ctx)
    if file_type is not None:
        writer.add_file_type(file_type)
    if sliding_window is not None:
        writer.add_sliding_window(sliding_window)
    if chat_template:
        writer.add_chat_template(chat_template)
    if model_type:
        writer.add_type(model_type)
    writer.add_array("tokenizer.ggml.tokens", [f"t{i}" for i in range(300)])
    writer.add_array("small.list", [1, 2, 3])
    for key, value in (extra or {}).items():
        writer.add_uint64(key, value) if isinstance(value, int) else writer.add_string(key, value)
    if tensors is None:
        tensors = {"tok_embd.weight": ((8, 32), "F32"), "norm.weight": ((32,), "F32")}
    for tensor_name, (shape, kind) in tensors.items():
        qtype = gguf.GGMLQuantizationType[kind]
        if kind in ("F32", "F16"):
            dtype = np.float32 if kind == "F32" else np.float16
            writer.add_tensor(tensor_name, np.ones(shape, dtype=dtype))
        else:
            block, size = gguf.GGML_QUANT_SIZES[qtype]
            byte_shape = (*shape[:-1], shape[-1] // block * size)
            writer.add_tensor(tensor_name, np.zeros(byte_shape, dtype=np.uint8), raw_dtype=qtype)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


@pytest.fixture
def home(tmp_path, monkeypatch):
    """A private HOME with none of the download tools' variables set."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    for name in TOOL_ENV:
        monkeypatch.delenv(name, raising=False)
    return home


def rewrite_gguf(source: Path, target: Path, values: dict | None = None, remove: tuple[str, ...] = ()) -> Path:
    """A copy of ``source`` with metadata set (``{key: (GGUFValueType name, value)}``) or removed."""
    from gguf.scripts.gguf_new_metadata import MetadataDetails, copy_with_new_metadata

    reader = gguf.GGUFReader(source)
    arch = reader.get_field(gguf.Keys.General.ARCHITECTURE)
    writer = gguf.GGUFWriter(str(target), arch.contents(), endianess=reader.endianess)
    details = {key: MetadataDetails(gguf.GGUFValueType[kind], value) for key, (kind, value) in (values or {}).items()}
    copy_with_new_metadata(reader, writer, details, list(remove))
    return target


def with_duplicate_token(source: Path, target: Path) -> Path:
    """A copy of ``source`` whose vocabulary holds one token string twice (same length, in place)."""
    import shutil

    shutil.copyfile(source, target)
    reader = gguf.GGUFReader(target, "r+")
    field = reader.fields["tokenizer.ggml.tokens"]
    first_of_length: dict[int, bytes] = {}
    for index in field.data:
        token = bytes(field.parts[index])
        if len(token) in first_of_length and first_of_length[len(token)] != token:
            field.parts[index][:] = np.frombuffer(first_of_length[len(token)], dtype=np.uint8)
            return target
        first_of_length.setdefault(len(token), token)
    raise AssertionError("no two tokens of the same length")


def vocabulary_file(path: Path, size: int, *, merges: bool) -> Path:
    """A GGUF with a ``size``-token vocabulary (and as many merges) and one tiny tensor:
    the largest header a model list or a load has to read."""
    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_name(f"a {size}-token vocabulary")
    writer.add_context_length(8192)
    writer.add_block_count(2)
    tokens = [f"tok{i}" + "x" * (i % 13) for i in range(size)]
    writer.add_tokenizer_model("gpt2" if merges else "llama")
    writer.add_token_list(tokens)
    writer.add_token_scores([0.0] * size)
    writer.add_token_types([1] * size)
    if merges:
        writer.add_token_merges([f"a{i} b{i}" for i in range(size)])
    writer.add_chat_template("{{ messages }}")
    writer.add_tensor("token_embd.weight", np.ones((4, 8), dtype=np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


VOCABULARY_REVISION = 1
"""Bump whenever ``vocabulary_file`` writes other bytes for the same size."""


def cached_vocabulary_file(size: int, *, merges: bool) -> Path:
    """``vocabulary_file`` kept in the made models' folder: writing a 262k-token header takes
    the gguf package seconds of Python, and the file depends on nothing but its size."""
    from sessions.durable import replacing
    from sessions.paths import ensure_private_dir, made_models_dir

    path = made_models_dir() / f"vocabulary-{size}{'-merges' if merges else ''}-r{VOCABULARY_REVISION}.gguf"
    if not path.is_file():
        ensure_private_dir(path.parent)
        with replacing(path, sync=False) as temp:  # parallel workers each see no file or a whole one
            vocabulary_file(temp, size, merges=merges)
    return path


def split_copy(source: Path, target: Path, max_tensors: int, *, small_first_shard: bool = False) -> list[Path]:
    """``source`` rewritten as a split model (``target`` names it; the parts get
    ``-0000N-of-0000M`` like llama.cpp's ``gguf-split``), its parts in order.
    ``small_first_shard`` keeps every tensor out of the first part, as
    ``gguf-split --no-tensor-first-split`` does."""
    reader = gguf.GGUFReader(source)
    arch = reader.get_field(gguf.Keys.General.ARCHITECTURE).contents()
    writer = gguf.GGUFWriter(str(target), arch, split_max_tensors=max_tensors,
                             small_first_shard=small_first_shard)
    for field in reader.fields.values():
        if field.name.startswith("GGUF.") or field.name == gguf.Keys.General.ARCHITECTURE:
            continue
        kind = field.types[0]
        sub = field.types[-1] if kind == gguf.GGUFValueType.ARRAY else None
        writer.add_key_value(field.name, field.contents(), kind, sub_type=sub)
    for tensor in reader.tensors:
        writer.add_tensor(tensor.name, tensor.data, raw_shape=tensor.data.shape, raw_dtype=tensor.tensor_type)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return sorted(target.parent.glob(f"{target.stem}-*-of-*.gguf"))
