"""GGUF header reading, model cards, and the search of the usual model folders."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from sessions.config import Config
from sessions.discovery import (
    ModelFileError,
    discover_models,
    memory_kind_for,
    read_gguf_header,
    read_model_card,
    search_roots,
)
from sessions.discovery.gguf_header import ArrayInfo
from sessions.discovery.model_card import HYBRID_ARCHITECTURES, RECURRENT_ARCHITECTURES
from sessions.memory_kind import MemoryKind

gguf = pytest.importorskip("gguf")
np = pytest.importorskip("numpy")

SDIST_ARCH = Path("/tmp/sdist/llama_cpp_python-0.3.36/vendor/llama.cpp/src/llama-arch.cpp")
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


# --- the header reader -------------------------------------------------------------


def test_card_reads_every_field(tmp_path):
    path = make_gguf(tmp_path / "tiny.gguf", name="Tiny Model", ctx=4096, file_type=15,
                     chat_template="{{ messages }}",
                     tensors={"a.weight": ((4, 256), "Q4_K"), "b.weight": ((4, 256), "Q6_K"),
                              "norm.weight": ((256,), "F32")})
    card = read_model_card(path)
    assert card.path == path
    assert card.name == "Tiny Model"
    assert card.architecture == "llama"
    assert card.parameter_count == 4 * 256 * 2 + 256
    assert card.file_size == path.stat().st_size
    assert card.quantization == "Q4_K_M"
    assert card.context_length == 4096
    assert card.memory_kind is MemoryKind.PLAIN
    assert card.has_chat_template
    assert card.tensor_count == 3
    assert (card.split_index, card.split_count, card.is_split) == (0, 1, False)
    assert card.readable and not card.is_auxiliary


def test_declared_parameter_count_and_file_stem_fallback(tmp_path):
    path = make_gguf(tmp_path / "no-name-q8.gguf", name=None, ctx=None,
                     extra={"general.parameter_count": 7_000_000_000})
    card = read_model_card(path)
    assert card.name == "no-name-q8"
    assert card.parameter_count == 7_000_000_000
    assert card.context_length is None
    assert not card.has_chat_template


def test_quantization_from_the_most_common_weight_type(tmp_path):
    path = make_gguf(tmp_path / "q.gguf", tensors={
        "a.weight": ((8, 64), "Q8_0"), "b.weight": ((4, 64), "F16"), "n.weight": ((4096,), "F32")})
    assert read_model_card(path).quantization == "Q8_0"


@pytest.mark.parametrize(("arch", "window", "kind"), [
    ("llama", None, MemoryKind.PLAIN),
    ("gemma3", 512, MemoryKind.SWA),
    ("gemma3", 0, MemoryKind.PLAIN),
    ("mamba", None, MemoryKind.RECURRENT),
    ("rwkv7", None, MemoryKind.RECURRENT),
    ("lfm2", 4096, MemoryKind.HYBRID),
    ("granitehybrid", None, MemoryKind.HYBRID),
])
def test_memory_kind_from_architecture_and_window(tmp_path, arch, window, kind):
    card = read_model_card(make_gguf(tmp_path / f"{arch}.gguf", arch, sliding_window=window))
    assert card.memory_kind is kind
    assert card.sliding_window == (window or None)


def _arch_list(source: str, function: str) -> set[str]:
    names = dict(re.findall(r"\{\s*(LLM_ARCH_\w+),\s*\"([^\"]+)\"\s*\}", source))
    body = source.split(f"bool {function}(const llm_arch & arch)")[1].split("default:")[0]
    return {names[enum] for enum in re.findall(r"case (LLM_ARCH_\w+):", body)}


@pytest.mark.skipif(not SDIST_ARCH.is_file(), reason="llama.cpp sources not unpacked in /tmp/sdist")
def test_architecture_lists_match_vendored_llama_cpp():
    source = SDIST_ARCH.read_text()
    assert _arch_list(source, "llm_arch_is_recurrent") == RECURRENT_ARCHITECTURES
    assert _arch_list(source, "llm_arch_is_hybrid") == HYBRID_ARCHITECTURES
    assert memory_kind_for("qwen35", 128) is MemoryKind.HYBRID


@pytest.mark.parametrize("name", ["stories260K.gguf", "ggml-vocab-phi-3.gguf"])
def test_header_matches_the_gguf_package(shared_dir, name):
    path = shared_dir / "models" / name
    ours = read_gguf_header(path)
    theirs = gguf.GGUFReader(path)
    keys = [k for k in theirs.fields if not k.startswith("GGUF.")]
    assert list(ours.metadata) == keys
    for key in keys:
        value = ours.metadata[key]
        if isinstance(value, ArrayInfo):  # long arrays: compare lengths, not 32 000 strings
            assert value.length == len(theirs.fields[key].data)
            continue
        expected = theirs.fields[key].contents()
        if isinstance(value, float):
            assert value == pytest.approx(expected, rel=1e-6)
        else:
            assert value == expected, key
    assert [t.name for t in ours.tensors] == [t.name for t in theirs.tensors]
    assert [t.shape for t in ours.tensors] == \
        [tuple(int(d) for d in t.shape) for t in theirs.tensors]
    assert [t.type_id for t in ours.tensors] == [int(t.tensor_type) for t in theirs.tensors]
    assert sum(t.n_elements for t in ours.tensors) == sum(int(t.n_elements) for t in theirs.tensors)
    if theirs.tensors:
        assert ours.data_offset == theirs.data_offset
        assert [ours.data_offset + t.offset for t in ours.tensors] == \
            [int(t.data_offset) for t in theirs.tensors]


def test_shared_models_give_sensible_cards(shared_dir):
    stories = read_model_card(shared_dir / "models" / "stories260K.gguf")
    assert stories.architecture == "llama" and stories.context_length == 2048
    assert stories.quantization == "F32" and stories.memory_kind is MemoryKind.PLAIN
    assert 200_000 < stories.parameter_count < 400_000
    vocab = read_model_card(shared_dir / "models" / "ggml-vocab-phi-3.gguf")
    assert vocab.has_chat_template and vocab.tensor_count == 0 and vocab.is_auxiliary
    assert vocab.quantization == "F16"


def test_big_endian_file(tmp_path):
    path = make_gguf(tmp_path / "be.gguf", endianess=gguf.GGUFEndian.BIG, file_type=1)
    header = read_gguf_header(path)
    assert header.byte_order == "big"
    assert header.metadata["general.name"] == "Tiny"
    assert header.metadata["small.list"] == [1, 2, 3]
    assert read_model_card(path).quantization == "F16"


# --- errors ------------------------------------------------------------------------


def test_missing_file_and_folder(tmp_path):
    with pytest.raises(ModelFileError, match="no such model file"):
        read_model_card(tmp_path / "absent.gguf")
    with pytest.raises(ModelFileError, match="folder"):
        read_model_card(tmp_path)


@pytest.mark.parametrize(("content", "words"), [
    (b"PK\x03\x04rest", r"not a GGUF file: .*starts with b'PK\\x03\\x04"),
    (b"", "not a GGUF file: .*empty"),
    (b"version https://git-lfs.github.com/spec/v1\n", "Git LFS pointer"),
    (b"<!DOCTYPE html><html>", "HTML page"),
])
def test_not_a_gguf_file(tmp_path, content, words):
    path = tmp_path / "fake.gguf"
    path.write_bytes(content)
    with pytest.raises(ModelFileError, match=words):
        read_model_card(path)


@pytest.mark.parametrize("version", [1, 4, 99])
def test_unsupported_version(tmp_path, version):
    path = make_gguf(tmp_path / "v.gguf")
    data = bytearray(path.read_bytes())
    data[4:8] = version.to_bytes(4, "little")
    path.write_bytes(bytes(data))
    with pytest.raises(ModelFileError, match=f"GGUF version {version} is not supported"):
        read_model_card(path)


def test_every_truncation_of_the_header_is_a_clear_error(tmp_path):
    path = make_gguf(tmp_path / "full.gguf")
    data = path.read_bytes()
    header = read_gguf_header(path)
    cut = tmp_path / "cut.gguf"
    header_end = header.data_offset - (header.data_offset % header.alignment or header.alignment)
    for length in range(4, header_end, max(1, header_end // 150)):
        cut.write_bytes(data[:length])
        with pytest.raises(ModelFileError, match="truncated GGUF header"):
            read_gguf_header(cut)


def test_partial_download_is_reported(tmp_path):
    path = make_gguf(tmp_path / "big.gguf", tensors={"w.weight": ((64, 64), "F32")})
    data = path.read_bytes()
    path.write_bytes(data[: len(data) - 100])
    read_gguf_header(path)  # the header itself is whole
    with pytest.raises(ModelFileError, match="incomplete file"):
        read_model_card(path)


def test_corrupt_value_type(tmp_path):
    path = make_gguf(tmp_path / "c.gguf", name=None, ctx=None)
    data = bytearray(path.read_bytes())
    key = b"general.architecture"
    type_at = data.index(key) + len(key)
    data[type_at:type_at + 4] = (77).to_bytes(4, "little")
    path.write_bytes(bytes(data))
    with pytest.raises(ModelFileError, match="corrupt GGUF header: unknown value type 77"):
        read_model_card(path)


# --- split models ------------------------------------------------------------------


def _split_model(folder: Path) -> list[Path]:
    tensors = {f"blk.{i}.weight": ((4, 32), "F32") for i in range(5)}
    make_gguf(folder / "big.gguf", tensors=tensors, split_max_tensors=2)
    parts = sorted(folder.glob("big-*-of-*.gguf"))
    assert len(parts) == 3
    return parts


def test_split_model_card_covers_every_part(tmp_path):
    parts = _split_model(tmp_path)
    card = read_model_card(parts[0])
    assert (card.split_index, card.split_count) == (0, 3)
    assert card.name == "Tiny"
    assert card.file_size == sum(p.stat().st_size for p in parts)
    assert card.parameter_count == 5 * 4 * 32
    assert card.readable and card.missing_parts == ()
    parts[2].unlink()
    broken = read_model_card(parts[0])
    assert broken.missing_parts == (parts[2].name,)
    assert "missing" in broken.error


def test_discovery_folds_split_parts(home, tmp_path):
    parts = _split_model(tmp_path / "models")
    cards = discover_models(Config(model_dirs=[str(tmp_path / "models")]))
    assert [c.path for c in cards] == [parts[0]]
    parts[0].unlink()
    orphans = discover_models(Config(model_dirs=[str(tmp_path / "models")]))
    assert {c.path for c in orphans} == set(parts[1:])
    assert all("first part" in c.error for c in orphans)


# --- discovery ---------------------------------------------------------------------


def test_search_roots_follow_each_tools_variables(home, monkeypatch, tmp_path):
    default = {(r.source, r.path) for r in search_roots(["~/models"])}
    assert default == {
        ("config", home / "models"),
        ("huggingface", home / ".cache" / "huggingface" / "hub"),
        ("lmstudio", home / ".lmstudio" / "models"),
        ("lmstudio", home / ".cache" / "lm-studio" / "models"),
        ("llama.cpp", home / ".cache" / "llama.cpp"),
    }
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.setenv("LLAMA_CACHE", str(tmp_path / "lc"))
    monkeypatch.setenv("LMSTUDIO_MODELS_DIR", str(tmp_path / "lms"))
    roots = {(r.source, r.path) for r in search_roots()}
    assert ("huggingface", tmp_path / "hf" / "hub") in roots
    assert ("llama.cpp", tmp_path / "lc") in roots
    assert ("lmstudio", tmp_path / "lms") in roots
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub2"))
    assert ("huggingface", tmp_path / "hub2") in {(r.source, r.path) for r in search_roots()}


def test_discovers_models_in_every_known_place(home, tmp_path, shared_dir):
    hub = home / ".cache" / "huggingface" / "hub" / "models--org--repo"
    blob = make_gguf(hub / "blobs" / "0123abcd", name="Hub Model", file_type=1)
    snapshot = hub / "snapshots" / "abc123" / "sub"
    snapshot.mkdir(parents=True)
    (snapshot / "hub-model.gguf").symlink_to(blob)
    make_gguf(home / ".lmstudio" / "models" / "pub" / "repo" / "lms.gguf", name="Alpha LMS")
    make_gguf(home / ".cache" / "lm-studio" / "models" / "old.gguf", name="old lms")
    make_gguf(home / ".cache" / "llama.cpp" / "org_repo_cpp.gguf", name="Cpp Cache", arch="mamba")
    mine = tmp_path / "mine"
    make_gguf(mine / "deep" / "er" / "own.gguf", name="Own")
    (mine / "link.gguf").symlink_to(mine / "deep" / "er" / "own.gguf")
    (mine / "broken.gguf").write_bytes(b"not a model at all")
    make_gguf(mine / "proj.gguf", name="Projector", model_type="mmproj")
    (mine / "README.md").write_text("not a model")
    outside = make_gguf(tmp_path / "elsewhere" / "chosen.gguf", name="Chosen")

    cards = discover_models(Config(model_dirs=[str(mine)], model=str(outside)))
    by_name = {c.name: c for c in cards}
    assert [c.name for c in cards] == sorted(by_name, key=str.casefold)
    assert set(by_name) == {
        "Hub Model", "Alpha LMS", "old lms", "Cpp Cache", "Own", "Chosen", "broken"}
    assert by_name["Hub Model"].source == "huggingface"
    assert by_name["Hub Model"].path == snapshot / "hub-model.gguf"
    assert by_name["Hub Model"].quantization == "F16"
    assert by_name["Alpha LMS"].source == "lmstudio"
    assert by_name["Cpp Cache"].source == "llama.cpp"
    assert by_name["Cpp Cache"].memory_kind is MemoryKind.RECURRENT
    assert by_name["Chosen"].source == "config"
    assert not by_name["broken"].readable
    assert "not a GGUF file" in by_name["broken"].error
    assert by_name["broken"].file_size == len(b"not a model at all")
    assert sum(1 for c in cards if c.name == "Own") == 1

    everything = discover_models(Config(model_dirs=[str(mine), str(shared_dir / "models")]),
                                 include_auxiliary=True)
    names = {c.name for c in everything}
    assert {"Projector", "Phi3", "llama"} <= names


def test_nothing_found_in_an_empty_home(home):
    assert discover_models(Config()) == []
    assert discover_models(None) == []


def test_a_pipe_named_gguf_is_refused_without_blocking(tmp_path):
    fifo = tmp_path / "pipe.gguf"
    os.mkfifo(fifo)
    with pytest.raises(ModelFileError, match="not a regular file"):
        read_model_card(fifo)


# --- against llama.cpp itself ------------------------------------------------------


def _engine_models(shared_dir: Path) -> list[Path]:
    from sessions.synth import ARCHS, make_model

    return [make_model(arch, "tiny") for arch in ARCHS] + [shared_dir / "models" / "stories260K.gguf"]


@pytest.mark.engine
def test_cards_agree_with_llama_cpp(shared_dir):
    """What the header says must be what llama.cpp finds when it loads the weights."""
    pytest.importorskip("llama_cpp")
    from sessions.engine.model import LlamaModel

    for path in _engine_models(shared_dir):
        card = read_model_card(path)
        model = LlamaModel(path)
        try:
            info = model.info
            assert card.memory_kind is info.kind, path.name
            assert card.architecture == info.architecture, path.name
            assert card.parameter_count == info.n_params, path.name
            assert card.context_length == info.n_ctx_train, path.name
            assert (card.sliding_window or 0) == info.n_swa, path.name
            assert card.has_chat_template == (info.chat_template is not None), path.name
            assert card.file_size == info.size_bytes
        finally:
            model.close()
