"""GGUF header reading and model cards: every field, every error, and against llama.cpp."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from sessions.discovery import ModelFileError, memory_kind_for, read_gguf_header, read_model_card
from sessions.discovery.gguf_header import ArrayInfo
from sessions.discovery.model_card import HYBRID_ARCHITECTURES, RECURRENT_ARCHITECTURES
from sessions.memory_kind import MemoryKind
from tests.gguf_support import make_gguf

gguf = pytest.importorskip("gguf")
np = pytest.importorskip("numpy")

ARCH_VERSION = "0.3.36"
ARCH_EXCERPT = Path(__file__).parents[1] / "data" / f"llama_arch_{ARCH_VERSION}.cpp"
"""llama.cpp's lists of recurrent and hybrid architectures, as the pinned llama-cpp-python
vendors them: kept here so that the check runs on every machine, CI included."""
SDIST_ARCH = Path(f"/tmp/sdist/llama_cpp_python-{ARCH_VERSION}/vendor/llama.cpp/src/llama-arch.cpp")
"""The whole source, where an unpacked sdist happens to be: the excerpt is checked against it."""


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


def test_architecture_lists_match_vendored_llama_cpp():
    llama_cpp = pytest.importorskip("llama_cpp")
    assert llama_cpp.__version__ == ARCH_VERSION, (
        f"llama-cpp-python {llama_cpp.__version__} is installed: refresh {ARCH_EXCERPT.name} from its "
        "src/llama-arch.cpp (its architecture names and the two functions read below)")
    source = ARCH_EXCERPT.read_text()
    assert _arch_list(source, "llm_arch_is_recurrent") == RECURRENT_ARCHITECTURES
    assert _arch_list(source, "llm_arch_is_hybrid") == HYBRID_ARCHITECTURES
    assert memory_kind_for("qwen35", 128) is MemoryKind.HYBRID
    if SDIST_ARCH.is_file():  # the excerpt says what the whole source says
        whole = SDIST_ARCH.read_text()
        for function in ("llm_arch_is_recurrent", "llm_arch_is_hybrid"):
            assert _arch_list(whole, function) == _arch_list(source, function)


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
    (b"PK\x03\x04rest", r'not a GGUF file: .*its first bytes are 50 4b 03 04, where a GGUF model starts with "GGUF"'),
    (b"These are my notes, not a model.\n", r'not a GGUF file: .*it is text \("These are my notes, not a model\."\)'),
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


# --- against llama.cpp itself ------------------------------------------------------


def _engine_models(shared_dir: Path) -> list[Path]:
    from sessions.synth import ARCHS, make_model

    return [make_model(arch, "tiny") for arch in ARCHS] + [shared_dir / "models" / "stories260K.gguf"]


@pytest.mark.engine
def test_cards_agree_with_llama_cpp(shared_dir):
    """What the header says must be what llama.cpp finds when it loads the weights."""
    pytest.importorskip("llama_cpp")
    from sessions.llama.model import LlamaModel

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
