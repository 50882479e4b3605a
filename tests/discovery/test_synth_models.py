"""The made models load in real llama.cpp, report the memory kind they stand for, and
produce finite, varied and reproducible numbers.

Every other test of the engine builds on these files, so what they promise is checked here
against llama.cpp itself, not against the maker's own idea of them. Only tiny models are
made here (the bench and gpu sizes are sized, not made).
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import time
from pathlib import Path

import jinja2.sandbox
import llama_cpp as L
import numpy as np
import pytest

from sessions.synth import (
    ARCHS,
    SHAPES,
    MemoryKind,
    SynthError,
    expected_kind,
    make_model,
    memory_bytes,
    model_spec,
    param_count,
)
from sessions.synth.vocab import build_vocab

from .raw_llama import decode, greedy, load_fixture, loaded_models_fixture, new_context, piece, tokenize  # noqa: F401

pytestmark = pytest.mark.engine

REPO = Path(__file__).resolve().parents[2]


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def kind_reported_by_llama_cpp(model) -> MemoryKind:
    if L.llama_model_is_hybrid(model):
        return MemoryKind.HYBRID
    if L.llama_model_is_recurrent(model):
        return MemoryKind.RECURRENT
    if L.llama_model_n_swa(model) > 0:
        return MemoryKind.SWA
    return MemoryKind.PLAIN


# ---------------------------------------------------------------- tests

@pytest.mark.parametrize("arch", ARCHS)
def test_model_loads_and_reports_its_memory_kind(arch, load, record_property):
    path = make_model(arch)
    model, seconds = load(path)
    record_property("load_seconds", round(seconds, 4))
    record_property("file_bytes", path.stat().st_size)

    kind = expected_kind(arch)
    assert kind_reported_by_llama_cpp(model) is kind
    assert L.llama_model_n_swa(model) == model_spec(arch).swa_window
    assert bool(L.llama_model_is_recurrent(model)) is (kind is MemoryKind.RECURRENT)
    assert bool(L.llama_model_is_hybrid(model)) is (kind is MemoryKind.HYBRID)
    assert L.llama_model_n_params(model) == param_count(arch)


def test_sliding_window_follows_the_parameter(load):
    model, _ = load(make_model("gemma3", swa_window=24))
    assert L.llama_model_n_swa(model) == 24


def test_tiny_layer_mix_has_both_layer_kinds():
    gemma = model_spec("gemma3")
    windowed = [layer % 6 < 5 for layer in range(gemma.n_layer)]
    assert windowed.count(False) >= 1 and windowed.count(True) >= 3
    lfm2 = model_spec("lfm2")
    attention = [lfm2.is_attention_layer(layer) for layer in range(lfm2.n_layer)]
    assert attention.count(True) >= 2 and attention.count(False) >= 2


@pytest.mark.parametrize("arch", ARCHS)
def test_two_contexts_give_identical_finite_logits(arch, load):
    model, _ = load(make_model(arch))
    vocab = L.llama_model_get_vocab(model)
    n_vocab = L.llama_vocab_n_tokens(vocab)
    prompt = tokenize(vocab, "The river ran past the old mill and under the stone bridge.")
    runs = []
    for _ in range(2):
        ctx = new_context(model)
        try:
            runs.append(decode(ctx, prompt, n_vocab))
        finally:
            L.llama_free(ctx)
    assert np.isfinite(runs[0]).all()
    assert runs[0].std() > 0.1, "logits are flat"
    assert np.array_equal(runs[0], runs[1])


@pytest.mark.parametrize("arch", ARCHS)
def test_greedy_decoding_wanders_over_printable_tokens(arch, load):
    model, _ = load(make_model(arch))
    vocab = L.llama_model_get_vocab(model)
    prompt = tokenize(vocab, "User: Hello! Can you help me plan a short trip?")
    out = greedy(model, prompt, 48)
    assert len(set(out)) >= 8, f"greedy decoding is stuck: {out}"
    assert sum(bool(L.llama_vocab_is_eog(vocab, t)) for t in out) <= len(out) // 4
    text = b"".join(piece(vocab, t) for t in out).decode("utf-8")
    assert text.strip() and all(char.isprintable() or char == "\n" for char in text), repr(text)
    assert greedy(model, prompt, 48) == out


@pytest.mark.parametrize("arch", ARCHS)
def test_never_predicted_tokens_get_almost_no_probability(arch, load):
    model, _ = load(make_model(arch))
    vocab = L.llama_model_get_vocab(model)
    n_vocab = L.llama_vocab_n_tokens(vocab)
    ctx = new_context(model)
    try:
        logits = decode(ctx, tokenize(vocab, "Good writing is clear writing."), n_vocab).astype(np.float64)
    finally:
        L.llama_free(ctx)
    probs = np.exp(logits - logits.max())
    probs /= probs.sum()
    silenced = build_vocab(n_vocab).never_predicted()
    assert len(silenced) > 100
    assert probs[silenced].sum() < 0.01
    assert probs.max() < 0.9, "the next-token distribution is one-hot"


@pytest.mark.parametrize("arch", ARCHS)
def test_making_again_gives_the_same_bytes(arch, tmp_path, monkeypatch):
    cached = make_model(arch)
    before = cached.stat().st_mtime_ns
    assert make_model(arch) == cached
    assert cached.stat().st_mtime_ns == before, "the cached file was rewritten"

    monkeypatch.setenv("LLAMACHAT_MODEL_CACHE", str(tmp_path / "fresh"))
    fresh = make_model(arch)
    assert fresh != cached and fresh.name == cached.name
    assert sha256(fresh) == sha256(cached)
    assert (tmp_path / "fresh").stat().st_mode & 0o777 == 0o700


def test_every_parameter_changes_the_file_name():
    base = make_model("gemma3")
    variants = [
        make_model("gemma3", seed=1),
        make_model("gemma3", swa_window=24),
        make_model("gemma3", n_ctx_train=4096),
        make_model("llama"),
        make_model("gemma3", markers="gemma"),
        make_model("gemma3", chat_template=""),
    ]
    assert len({base, *variants}) == 7
    assert base.name.startswith("gemma3-tiny-") and base.suffix == ".gguf"


def test_seed_changes_the_weights(load):
    first = load(make_model("llama"))[0]
    second = load(make_model("llama", seed=1))[0]
    prompts = []
    for model in (first, second):
        vocab = L.llama_model_get_vocab(model)
        ctx = new_context(model)
        try:
            prompts.append(decode(ctx, tokenize(vocab, "Hello there"), L.llama_vocab_n_tokens(vocab)))
        finally:
            L.llama_free(ctx)
    assert not np.array_equal(prompts[0], prompts[1])


def test_chat_template_and_control_tokens(load):
    model, _ = load(make_model("llama"))
    vocab = L.llama_model_get_vocab(model)
    template = L.llama_model_chat_template(model, None)
    assert template and b"<|im_start|>" in template

    rendered = jinja2.sandbox.ImmutableSandboxedEnvironment().from_string(template.decode()).render(
        messages=[{"role": "user", "content": "Hello!"}], add_generation_prompt=True
    )
    assert rendered == "<|im_start|>user\nHello!<|im_end|>\n<|im_start|>assistant\n"

    ids = {}
    for text in ("<|im_start|>", "<|im_end|>", "<|endoftext|>"):
        tokens = tokenize(vocab, text, special=True)
        assert len(tokens) == 1, f"{text} is not a single token"
        assert len(tokenize(vocab, text, special=False)) > 1, f"{text} is parsed without parse_special"
        assert L.llama_vocab_get_attr(vocab, tokens[0]) & L.LLAMA_TOKEN_ATTR_CONTROL
        ids[text] = tokens[0]
    assert L.llama_vocab_eos(vocab) == ids["<|im_end|>"]
    assert L.llama_vocab_is_eog(vocab, ids["<|im_end|>"])
    assert L.llama_vocab_is_eog(vocab, ids["<|endoftext|>"])
    assert not L.llama_vocab_is_eog(vocab, ids["<|im_start|>"])
    assert ids["<|im_start|>"] in tokenize(vocab, rendered, special=True)


STYLE_MARKERS = {
    "gemma": ("<bos>", "<end_of_turn>", ("<start_of_turn>", "<end_of_turn>")),
    "llama3": ("<|begin_of_text|>", "<|eot_id|>", ("<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>")),
    "none": ("<|endoftext|>", "<|endoftext|>", ()),
}


@pytest.mark.parametrize("markers", sorted(STYLE_MARKERS))
def test_marker_styles_have_their_control_tokens_and_no_template(markers, load):
    model, _ = load(make_model("llama", markers=markers))
    vocab = L.llama_model_get_vocab(model)
    assert not L.llama_model_chat_template(model, None)  # no key at all
    bos, end_of_turn, turn_markers = STYLE_MARKERS[markers]
    for text in (bos, end_of_turn, *turn_markers):
        [token] = tokenize(vocab, text, special=True)
        assert L.llama_vocab_get_attr(vocab, token) & L.LLAMA_TOKEN_ATTR_CONTROL
    assert L.llama_vocab_bos(vocab) == tokenize(vocab, bos, special=True)[0]
    assert L.llama_vocab_is_eog(vocab, tokenize(vocab, end_of_turn, special=True)[0])
    for text in ("<|im_start|>", "<|im_end|>"):
        assert len(tokenize(vocab, text, special=True)) > 1, f"{text} is a token of the {markers} style"


def test_an_empty_template_leaves_the_key_out(load):
    model, _ = load(make_model("llama", chat_template=""))
    assert not L.llama_model_chat_template(model, None)
    assert len(tokenize(L.llama_model_get_vocab(model), "<|im_start|>", special=True)) == 1


def test_tokenizer_round_trips_and_merges_common_words(load):
    model, _ = load(make_model("mamba"))
    vocab = L.llama_model_get_vocab(model)
    text = "The children went home, and Thomas stayed on the bridge at 7:45.\nCafé ünïcode too!"
    tokens = tokenize(vocab, text)
    assert b"".join(piece(vocab, t) for t in tokens).decode("utf-8") == text
    assert len(tokens) < len(text.encode()) * 0.6, "common words were not merged"
    for word in (" the", " and", " river"):
        assert len(tokenize(vocab, word)) == 1, f"{word!r} is not one token"


def test_sizes_are_what_they_say():
    for arch in ARCHS:
        assert 80_000_000 <= param_count(arch, "bench") <= 130_000_000, arch
        assert param_count(arch, "tiny") < 2_000_000, arch
        assert 1_700_000_000 <= param_count(arch, "gpu") <= 2_300_000_000, arch
        gpu = model_spec(arch, "gpu")
        assert gpu.weights_f16 and gpu.head_dim in (0, 128), arch  # CUDA's flash attention has 128
    for name, shape in SHAPES.items():  # thin bodies: a CPU prefills thousands of tokens
        assert param_count(shape.arch, name) < 1_500_000_000, name
        assert model_spec(shape.arch, name).vocab_size <= 32_000, name


REAL_BYTES = {
    # shape: (KV bytes per token, windowed-layer KV per token, window, recurrent state bytes),
    # by hand from the configs: layers x KV heads x (K + V) x head size x 2 bytes (f16), and
    # recurrent layers x ((conv - 1) x (inner + 2 x groups x state) + state x inner) x 4 bytes.
    "gemma3-4b": (34 * 4 * 2 * 256 * 2, 29 * 4 * 2 * 256 * 2, 1024, 0),
    "gemma3-27b": (62 * 16 * 2 * 128 * 2, 52 * 16 * 2 * 128 * 2, 1024, 0),
    "gemma4-31b": (50 * 16 * 2 * 256 * 2 + 10 * 4 * 2 * 512 * 2, 50 * 16 * 2 * 256 * 2, 1024, 0),
    "gemma4-e2b": (12 * 1 * 2 * 256 * 2 + 3 * 1 * 2 * 512 * 2, 12 * 1 * 2 * 256 * 2, 512, 0),
    "gpt-oss-20b": (24 * 8 * 2 * 64 * 2, 12 * 8 * 2 * 64 * 2, 128, 0),
    "qwen3.5-9b": (8 * 4 * 2 * 256 * 2, 0, 0, 24 * (3 * (4096 + 2 * 16 * 128) + 128 * 4096) * 4),
    "granite-4.0-h-small": (4 * 8 * 2 * 128 * 2, 0, 0, 36 * (3 * (4096 + 2 * 1 * 256) + 256 * 4096) * 4),
}


@pytest.mark.parametrize("name", SHAPES)
def test_real_shapes_hold_the_bytes_of_the_real_models(name):
    arch = SHAPES[name].arch
    found = memory_bytes(model_spec(arch, name))
    assert (found.kv_per_token, found.window_kv_per_token, found.window, found.state) == REAL_BYTES[name]
    assert model_spec(arch, name, swa_window=64).swa_window == model_spec(arch, name).swa_window  # its own


def test_real_shapes_match_the_sizes_users_report():
    """A Gemma 3 4B token holds 139 KB; a Gemma 3 27B window about 430 MB; a Gemma 4 31B one
    800 MiB; a Qwen3.5-9B state about 50 MiB; a Granite-4.0-H-Small state about 150 MB."""
    def bytes_of(name):
        return memory_bytes(model_spec(SHAPES[name].arch, name))

    assert bytes_of("gemma3-4b").kv_bytes(1000) == 139_264_000
    assert 420e6 < bytes_of("gemma3-27b").window_bytes < 440e6
    assert bytes_of("gemma4-31b").window_bytes == 800 * 2**20
    assert 49 * 2**20 < bytes_of("qwen3.5-9b").state < 51 * 2**20
    assert 145e6 < bytes_of("granite-4.0-h-small").state < 160e6


@pytest.mark.parametrize(
    ("kwargs", "words"),
    [
        (dict(arch="gpt5"), "unknown model architecture"),
        (dict(arch="llama", size="huge"), "unknown model size"),
        (dict(arch="gemma3", swa_window=0), "sliding window"),
        (dict(arch="llama", seed=-1), "seed"),
        (dict(arch="llama", n_ctx_train=0), "training context"),
        (dict(arch="llama", markers="vicuna"), "unknown marker style 'vicuna' \\(known: chatml, gemma"),
        (dict(arch="gemma3", size="huge"), "choose one of tiny, bench, gpu, or a real shape: gemma3-4b, gemma3-27b"),
        (dict(arch="llama", size="gemma3-4b"), "the shape 'gemma3-4b' is a gemma3 model, not llama"),
        (dict(arch="gpt-oss", swa_window=-5), "sliding window"),
    ],
)
def test_bad_requests_are_refused_in_plain_words(kwargs, words):
    with pytest.raises(SynthError, match=words):
        make_model(**kwargs)


def test_command_line_prints_the_path():
    expected = make_model("lfm2")
    done = subprocess.run(
        [sys.executable, "-m", "sessions.synth", "lfm2", "--size", "tiny"],
        cwd=REPO, capture_output=True, text=True, check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == str(expected)


def test_command_line_lists_the_shapes_and_refuses_a_mismatch():
    done = subprocess.run([sys.executable, "-m", "sessions.synth", "--shapes"],
                          cwd=REPO, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    rows = {line.split()[0]: line.split() for line in done.stdout.splitlines()[1:]}
    assert set(rows) == set(SHAPES)
    assert rows["gemma3-4b"][1:3] == ["gemma3", "139264"] and rows["qwen3.5-9b"][-2] == "52690944"
    done = subprocess.run([sys.executable, "-m", "sessions.synth", "llama", "--shape", "gemma3-4b"],
                          cwd=REPO, capture_output=True, text=True, check=False)
    assert done.returncode == 2 and "the shape gemma3-4b is a gemma3 model, not llama" in done.stderr


def test_two_processes_making_one_model_never_leave_a_partial_file(tmp_path):
    env = dict(os.environ, LLAMACHAT_MODEL_CACHE=str(tmp_path))
    command = [sys.executable, "-m", "sessions.synth", "mamba", "--seed", "7"]
    workers = [subprocess.Popen(command, cwd=REPO, env=env, stdout=subprocess.PIPE, text=True) for _ in range(2)]
    paths = {worker.communicate()[0].strip() for worker in workers}
    assert all(worker.returncode == 0 for worker in workers)
    assert len(paths) == 1
    assert [p.name for p in tmp_path.iterdir()] == [Path(paths.pop()).name]


def test_leftovers_of_a_killed_maker_are_swept(tmp_path, monkeypatch):
    monkeypatch.setenv("LLAMACHAT_MODEL_CACHE", str(tmp_path))
    name = make_model("mamba").name
    old, recent = tmp_path / f".{name}.1.0badc0de.tmp", tmp_path / f".{name}.2.0badc0de.tmp"
    old.write_bytes(b"half a model")
    recent.write_bytes(b"being written")
    os.utime(old, (time.time() - 2 * 3600,) * 2)
    next(tmp_path.glob("*.gguf")).unlink()
    make_model("mamba")
    assert not old.exists() and recent.exists()
