"""Malformed GGUF files that made llama.cpp abort the whole process, and large headers.

A duplicated token string, a ``block_count`` of 0 or 1000, a NaN norm epsilon and an
odd or too-wide rope dimension each ended llamachat with exit status 134 and a
debugger's backtrace on the terminal. Each is now refused in one sentence before
llama.cpp sees it, by the header checks or, for what a header cannot prove (here a MoE
expert count llama.cpp asserts on), by a trial load in a child process. The files are
real made models with one defect each; the rope defects are in a gemma3 model, since
llama.cpp's loader refuses a llama model's rope dimension other than its head size, and
a gemma3 one passes the load and aborts at the first decode.

The header is read when models are listed and before every load: a 262,144-token
vocabulary, with and without as many merges, must read whole here; how long it takes is
the benchmark's to say (``tests.bench.costs.big_vocabulary_headers``: goal 50 ms).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from sessions.discovery import ModelFileError, check_before_load, read_model_card
from sessions.discovery import probe as probe_module
from sessions.discovery.gguf_header import read_gguf_header, string_array
from sessions.synth import make_model
from tests.gguf_support import cached_vocabulary_file, rewrite_gguf, with_duplicate_token
from tests.store_child import REPO

VOCAB = 262_144

DEFECTS = {
    "block-count-0": ({"llama.block_count": ("UINT32", 0)}, "llama.block_count is 0 (a model has 1 to 512 layers)"),
    "block-count-1000": ({"llama.block_count": ("UINT32", 1000)}, "llama.block_count is 1000"),
    "epsilon-nan": ({"llama.attention.layer_norm_rms_epsilon": ("FLOAT32", float("nan"))},
                    "llama.attention.layer_norm_rms_epsilon is nan"),
    "duplicate-token": (None, "twice; llama.cpp would crash on it"),
    "experts": ({"llama.expert_used_count": ("UINT32", 2)},
                "llama.cpp crashed trying to load it (SIGABRT: llama-model.cpp:"),
    "rope-odd": ({"gemma3.rope.dimension_count": ("UINT32", 7)},
                 "gemma3.rope.dimension_count is 7 (it must be an even number)"),
    "rope-wide": ({"gemma3.rope.dimension_count": ("UINT32", 4096)},
                  "gemma3.rope.dimension_count (4096) is wider than an attention head (32)"),
}
ARCH = {"rope-odd": "gemma3", "rope-wide": "gemma3"}
"""The architecture of a defect's source model (llama when not named)."""


@pytest.fixture(scope="module")
def defective(tmp_path_factory):
    folder = tmp_path_factory.mktemp("defects")
    made = {}
    for name, (values, _) in DEFECTS.items():
        source = make_model(ARCH.get(name, "llama"), "tiny")
        target = folder / f"{name}.gguf"
        made[name] = (with_duplicate_token(source, target) if values is None
                      else rewrite_gguf(source, target, values))
    return made


def llamachat(*argv: str) -> subprocess.CompletedProcess:
    command = [sys.executable, "-c", "import sys; from tui.entry import main; sys.exit(main())", *argv]
    return subprocess.run(command, cwd=REPO, env=os.environ.copy(),
                          stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=180)


@pytest.mark.engine
@pytest.mark.parametrize("name", DEFECTS)
@pytest.mark.parametrize("how", ["ask", "app"])
def test_a_file_llama_cpp_would_abort_on_is_one_sentence_and_exit_1(defective, name, how):
    argv = ["ask", "-m", str(defective[name]), "hello"] if how == "ask" else ["-m", str(defective[name])]
    done = llamachat(*argv)
    assert done.returncode == 1, (done.returncode, done.stderr[-3000:])
    assert done.stdout == "" and done.stderr.count("\n") == 1, done.stderr[-3000:]
    assert done.stderr.startswith(f"llamachat: error: {name}.gguf: invalid model file: ")
    assert DEFECTS[name][1] in done.stderr
    assert "Traceback" not in done.stderr and "gdb" not in done.stderr


def test_the_model_list_names_what_the_header_shows(defective):
    for name in ("block-count-0", "block-count-1000", "epsilon-nan", "rope-odd", "rope-wide"):
        card = read_model_card(defective[name])
        assert card.error and DEFECTS[name][1] in card.error
    assert read_model_card(defective["duplicate-token"]).error is None  # checked before a load only


@pytest.mark.engine
def test_a_file_that_passed_its_trial_load_is_not_tried_again(tmp_path, monkeypatch):
    model = rewrite_gguf(make_model("llama", "tiny"), tmp_path / "fine.gguf", {"general.name": ("STRING", "fine")})
    tries = []
    real = probe_module._try
    monkeypatch.setattr(probe_module, "_try", lambda path: tries.append(path) or real(path))
    check_before_load(model)
    assert len(tries) == 1
    from sessions.discovery import load_check

    load_check._checked.clear()  # a new process
    check_before_load(model)
    assert len(tries) == 1, "a file that passed was tried again"
    os.utime(model, ns=(time.time_ns(), time.time_ns()))  # changed on disk: tried again
    load_check._checked.clear()
    check_before_load(model)
    assert len(tries) == 2


def test_a_new_build_of_llama_cpp_tries_a_passed_file_again(tmp_path, monkeypatch):
    """An upgrade or a rebuild of llama-cpp-python writes its package anew: what passed
    under the old build is tried again under the new one."""
    from importlib.machinery import ModuleSpec

    from sessions.discovery import load_check

    model = rewrite_gguf(make_model("llama", "tiny"), tmp_path / "fine.gguf", {"general.name": ("STRING", "fine")})
    package = tmp_path / "llama_cpp" / "__init__.py"
    package.parent.mkdir()
    package.write_text('__version__ = "0.3.36"\n')
    monkeypatch.setattr(probe_module, "find_spec", lambda name: ModuleSpec(name, None, origin=str(package)))
    tries = []
    real = probe_module._try
    monkeypatch.setattr(probe_module, "_try", lambda path: tries.append(path) or real(path))
    check_before_load(model)
    load_check._checked.clear()  # a new process, the same build
    check_before_load(model)
    assert len(tries) == 1
    package.write_text('__version__ = "0.3.37.post1"\n')  # a new build
    load_check._checked.clear()
    check_before_load(model)
    assert len(tries) == 2


def test_a_crashed_trial_is_not_remembered_and_names_the_assertion(defective):
    for _ in range(2):
        with pytest.raises(ModelFileError, match="GGML_ASSERT\\(n_expert_used_max <= hparams.n_expert\\)"):
            check_before_load(defective["experts"])


# -- the header's speed ------------------------------------------------------------------


@pytest.fixture(scope="module")
def big_vocabulary():
    return cached_vocabulary_file(VOCAB, merges=False)


@pytest.fixture(scope="module")
def big_vocabulary_with_merges():
    return cached_vocabulary_file(VOCAB, merges=True)


def test_a_256k_vocabulary_header_is_read_whole(big_vocabulary):
    card = read_model_card(big_vocabulary)
    assert card.error is None and card.has_chat_template and card.tensor_count == 1


def test_with_as_many_merges_too(big_vocabulary_with_merges):
    card = read_model_card(big_vocabulary_with_merges)
    assert card.error is None and card.has_chat_template and card.tensor_count == 1


def test_the_duplicate_check_reads_every_token_exactly(big_vocabulary):
    header = read_gguf_header(big_vocabulary)
    tokens = string_array(big_vocabulary, header.metadata["tokenizer.ggml.tokens"])
    assert len(tokens) == VOCAB and tokens[5] == b"tok5xxxxx"
    assert tokens[-1] == f"tok{VOCAB - 1}".encode() + b"x" * ((VOCAB - 1) % 13)
