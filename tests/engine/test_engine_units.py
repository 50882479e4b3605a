"""The engine's small parts: load errors, sampling, UTF-8-safe streaming, batches."""

from __future__ import annotations

import shutil

import numpy as np
import pytest

from sessions.branching.segments import batches, segment_boundaries
from sessions.llama.detokenizer import Detokenizer
from sessions.llama.fingerprint import HEAD_BYTES, SAMPLES, is_legacy, legacy_fingerprint, model_fingerprint
from sessions.llama.model import LlamaModel, ModelLoadError
from sessions.sampling import SamplingSettings


def test_load_errors_are_plain_words(tmp_path, model_paths):
    full = model_paths["llama"].read_bytes()
    (tmp_path / "half.gguf").write_bytes(full[: len(full) // 2])
    (tmp_path / "notes.gguf").write_text("hello world")
    cases = {
        tmp_path / "half.gguf": "incomplete file",
        tmp_path / "notes.gguf": "not a GGUF file",
        tmp_path / "missing.gguf": "not found",
        tmp_path: "not a file",
    }
    for path, words in cases.items():
        with pytest.raises(ModelLoadError, match=words):
            LlamaModel(path)


def test_model_info_and_progress(model_paths):
    fractions = []
    model = LlamaModel(model_paths["gemma3"], on_progress=fractions.append)
    try:
        assert fractions and fractions[-1] == pytest.approx(1.0)
        assert model.info.kind.value == "swa" and model.info.n_swa == 32
        assert model.info.chat_template and "<|im_start|>" in model.info.chat_template
        assert model.info.fingerprint == model_fingerprint(model_paths["gemma3"])
        assert model.is_eog(model.tokenize("<|im_end|>")[0])
    finally:
        model.close()


def test_fingerprint_tells_same_shaped_models_apart_and_ignores_where_the_file_is(tmp_path):
    from sessions.synth import make_model

    first, second = make_model("llama", "bench", seed=0), make_model("llama", "bench", seed=1)
    assert first.stat().st_size == second.stat().st_size  # same shape, other weights
    assert model_fingerprint(first) != model_fingerprint(second)
    moved = tmp_path / "renamed.gguf"
    shutil.copyfile(first, moved)
    assert model_fingerprint(moved) == model_fingerprint(first)
    assert model_fingerprint(first).startswith("gguf-sampled-1:")
    assert is_legacy(legacy_fingerprint(first)) and not is_legacy(model_fingerprint(first))


def test_fingerprint_sees_weights_changed_past_the_header(tmp_path):
    from sessions.synth import make_model

    path = tmp_path / "model.gguf"
    shutil.copyfile(make_model("llama", "bench", seed=0), path)
    before = model_fingerprint(path)
    size = path.stat().st_size
    with open(path, "r+b") as handle:  # a block that the sampling reads, deep in the weights
        step = (size - HEAD_BYTES) // SAMPLES
        handle.seek(HEAD_BYTES + 40 * step + 100)
        handle.write(b"\x55" * 16)
    assert model_fingerprint(path) != before


def test_greedy_sampler_is_argmax_and_seeded_sampling_repeats(loaded_models):
    from sessions.llama.sampler import Sampler

    model = loaded_models["llama"]
    rng = np.random.default_rng(3)
    logits = rng.normal(size=model.info.n_vocab).astype(np.float32)
    greedy = Sampler(SamplingSettings(temperature=0.0), model.info.n_vocab)
    assert greedy.sample(logits) == int(np.argmax(logits))
    picks = []
    for _ in range(2):
        sampler = Sampler(SamplingSettings(temperature=1.0, top_k=0, top_p=1.0, min_p=0.0, seed=7), model.info.n_vocab)
        picks.append([sampler.sample(logits) for _ in range(20)])
        sampler.close()
    assert picks[0] == picks[1]
    assert len(set(picks[0])) > 1  # it really samples
    top = Sampler(SamplingSettings(temperature=1.0, top_k=1, seed=1), model.info.n_vocab)
    assert {top.sample(logits) for _ in range(10)} == {int(np.argmax(logits))}


@pytest.mark.parametrize("case", ["random", "ties", "nan first", "nan inside", "infinities", "signed zeros"])
def test_greedy_shortcut_picks_what_the_chain_picks(case):
    """Greedy with no penalty skips the chain (``np.argmax``): the same token, edge cases included."""
    from sessions.llama.sampler import Sampler

    n = 4096
    rng = np.random.default_rng(11)
    logits = rng.normal(size=n).astype(np.float32)
    if case == "ties":
        logits = np.round(logits).astype(np.float32)  # many equal largest values: the first one wins
    elif case == "nan first":
        logits[0] = np.nan  # the chain's greedy keeps index 0 (nothing compares larger than NaN)
    elif case == "nan inside":
        logits[[7, 300]] = np.nan
    elif case == "infinities":
        logits[[5, 9]] = np.inf
        logits[::3] = -np.inf
    elif case == "signed zeros":
        logits[:] = -1.0
        logits[[40, 41]] = [-0.0, 0.0]
    shortcut = Sampler(SamplingSettings(temperature=0.0), n)
    chain = Sampler(SamplingSettings(temperature=0.0), n)
    chain._argmax = False  # the reference: the whole vocabulary through llama.cpp's chain
    assert shortcut._argmax
    assert shortcut.sample(logits) == chain.sample(logits)
    penalised = Sampler(SamplingSettings(temperature=0.0, repeat_penalty=1.3), n)
    assert not penalised._argmax  # a penalty keeps history: the chain must see every token
    for sampler in (shortcut, chain, penalised):
        sampler.close()


def test_repeat_penalty_changes_the_choice(loaded_models):
    from sessions.llama.sampler import Sampler

    n = loaded_models["llama"].info.n_vocab
    logits = np.zeros(n, dtype=np.float32)
    logits[5], logits[6] = 2.0, 1.9
    sampler = Sampler(SamplingSettings(temperature=0.0, repeat_penalty=1.5, repeat_last_n=8), n)
    assert sampler.sample(logits) == 5
    assert sampler.sample(logits) == 6  # 5 was just used and is penalised


def test_detokenizer_never_splits_a_character():
    pieces = {1: b"h", 2: "é".encode()[:1], 3: "é".encode()[1:], 4: "🙂".encode()[:2], 5: "🙂".encode()[2:]}
    detok = Detokenizer(pieces.__getitem__)
    out = [detok.push(t) for t in (1, 2, 3, 4, 5)]
    assert out == ["h", "", "é", "", "🙂"]
    assert detok.text == "hé🙂"
    detok.push(4)
    assert detok.finish() == "\ufffd"  # an unfinished character is shown, not lost silently


def test_a_continued_reply_completes_the_character_its_cut_left_unfinished():
    """Cut inside 𓀃 (4 bytes: two here, two after), the continuation shows the character."""
    from sessions.llama.detokenizer import incomplete_tail

    pieces = {1: b"ab ", 2: "𓀃".encode()[:2], 3: "𓀃".encode()[2:], 4: b" c"}
    cut = Detokenizer(pieces.__getitem__)
    assert [cut.push(t) for t in (1, 2)] == ["ab ", ""]
    continued = Detokenizer(pieces.__getitem__)
    continued.prime([1, 2])
    assert [continued.push(t) for t in (3, 4)] == ["𓀃", " c"]
    assert continued.text == "𓀃 c"  # the reply's earlier text is not repeated
    unprimed = Detokenizer(pieces.__getitem__)
    assert unprimed.push(3) == "\ufffd\ufffd"  # what the stream showed before
    assert incomplete_tail("é🙂".encode()) == b"" and incomplete_tail(b"a\xf0\x93") == b"\xf0\x93"
    assert incomplete_tail(b"\x80\x80\x80\x80") == b""  # no lead byte in reach: nothing held


def test_segment_boundaries_and_batches():
    assert segment_boundaries([10, 10, 5000], 2048) == [10, 2058, 4106, 5000]
    assert segment_boundaries([3, 3, 9], 4) == [3, 7, 9]  # empty messages add nothing
    assert batches(0, 10, 4) == [(0, 4), (4, 8), (8, 10)]
    assert batches(0, 9, 4) == [(0, 4), (4, 7), (7, 9)]  # never a one-token tail
    assert batches(5, 6, 4) == [(5, 6)]  # a one-token message is one token
    assert batches(0, 3, 64, stepped=True) == [(0, 1), (1, 2), (2, 3)]


def test_abort_flag_is_polled_without_python():
    """The flag llama.cpp polls per graph node is libc's strlen on a buffer, not a Python call."""
    from sessions.llama.abort_flag import AbortFlag
    from sessions.llama.native import lib

    flag = AbortFlag(lib())
    assert flag.native
    poll = flag.callback
    assert not poll(flag.data) and not flag.is_set()
    flag.set()
    assert poll(flag.data) and flag.is_set()
    flag.clear()
    assert not poll(flag.data)


def test_tokens_of_sessions_from_before_the_sampled_fingerprint_are_refiled(tmp_path):
    """A session made when a model's identity was a hash of the whole file keeps its tokens."""
    from sessions.api.chat import EngineSettings, SessionController
    from sessions.engine.factory import llama_engine_factory
    from sessions.store import SessionStore
    from sessions.synth import make_model

    path, other = make_model("llama", "tiny"), make_model("llama", "tiny", seed=1)
    with SessionStore.open(tmp_path / "s.sqlite3") as store:
        mine = store.create_session(model_path=str(path), model_fingerprint=legacy_fingerprint(path))
        theirs = store.create_session(model_path=str(path), model_fingerprint=legacy_fingerprint(other))
        kept = store.add_message(mine.id, None, "user", "hello")
        store.set_tokens(kept.id, legacy_fingerprint(path), [5, 6, 7])
        foreign = store.add_message(theirs.id, None, "user", "hello")
        store.set_tokens(foreign.id, legacy_fingerprint(other), [8, 9])
        controller = SessionController(store, engine_factory=llama_engine_factory(None),
                                       settings=EngineSettings(n_ctx=256, n_batch=64, threads=1))
        try:
            info = controller.load_model(path)
        finally:
            controller.close()
        assert store.get_tokens(kept.id, info.fingerprint) == [5, 6, 7]
        assert store.get_session(mine.id).model_fingerprint == info.fingerprint
        assert store.get_tokens(foreign.id, info.fingerprint) is None  # another file's tokens stay
        assert store.get_session(theirs.id).model_fingerprint == legacy_fingerprint(other)
