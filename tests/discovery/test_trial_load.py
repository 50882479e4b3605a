"""The trial load a new model file gets: every abort still caught, no tensor data read.

The trial (``sessions.llama.trial_load``, in a child process) loads a file without its
tensor data and builds a decode's graph without running it. The aborts llama.cpp meets
only in the compute kernels of a decode are therefore the header checks' to stop
(``sessions.discovery.abort_checks``): these tests show both halves, and that the trial's
memory does not grow with the file (it no longer reads the weights a second time).
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from sessions.discovery import probe as probe_module
from sessions.discovery import read_model_card
from sessions.discovery.abort_checks import header_problem
from sessions.discovery.gguf_header import GGUFHeader
from sessions.synth import make_model
from tests.gguf_support import rewrite_gguf
from tests.store_child import REPO

DECODE_ONLY = {  # each passes llama.cpp's load and graph, and aborts in a kernel of the first decode
    "epsilon-negative": ("llama", {"llama.attention.layer_norm_rms_epsilon": ("FLOAT32", -1.0)}, "eps >= 0"),
    "rope-odd": ("gemma3", {"gemma3.rope.dimension_count": ("UINT32", 7)}, "n_dims % 2 == 0"),
    "rope-wide": ("gemma3", {"gemma3.rope.dimension_count": ("UINT32", 4096)}, "n_dims <= ne0"),
}


@pytest.fixture(scope="module")
def decode_only(tmp_path_factory):
    folder = tmp_path_factory.mktemp("decode-only")
    return {name: rewrite_gguf(make_model(arch, "tiny"), folder / f"{name}.gguf", values)
            for name, (arch, values, _) in DECODE_ONLY.items()}


@pytest.mark.engine
@pytest.mark.parametrize("name", DECODE_ONLY)
def test_an_abort_met_only_at_the_first_decode_passes_the_trial_and_the_header_stops_it(decode_only, name):
    problem, passed = probe_module._try(decode_only[name])
    assert problem is None and passed, "the trial decoded: it reads the weights again"
    error = read_model_card(decode_only[name]).error
    assert error and error.endswith("llama.cpp would crash on it"), error


@pytest.mark.engine
@pytest.mark.parametrize("name", DECODE_ONLY)
def test_a_real_decode_of_the_same_file_does_abort(decode_only, name):
    """What the header check stands for: without it, the first decode ends the process."""
    script = ("import ctypes, sys\nfrom sessions.llama.native import lib\nL = lib()\n"
              "p = L.llama_model_default_params(); p.n_gpu_layers = 0\n"
              "m = L.llama_model_load_from_file(sys.argv[1].encode(), p)\n"
              "c = L.llama_context_default_params(); c.n_ctx = c.n_batch = c.n_ubatch = 8\n"
              "x = L.llama_init_from_model(m, c)\nt = (ctypes.c_int32 * 1)(0)\n"
              "L.llama_decode(x, L.llama_batch_get_one(t, 1))\n")
    done = subprocess.run([sys.executable, "-c", script, str(decode_only[name])], cwd=REPO,
                          env=dict(os.environ, GGML_NO_BACKTRACE="1"), capture_output=True, text=True, timeout=120)
    assert done.returncode != 0 and DECODE_ONLY[name][2] in done.stderr, done.stderr[-2000:]


def _trial_peak_rss(path) -> int:
    child = subprocess.Popen([sys.executable, "-m", probe_module.TRIAL, str(path)], cwd=REPO,
                             stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(child.pid, 0)
    child.returncode = os.waitstatus_to_exitcode(status)
    assert child.returncode == 0
    return usage.ru_maxrss * 1024


@pytest.mark.engine
def test_the_trial_reads_no_tensor_data():
    big = make_model("llama", "bench")
    small = make_model("llama", "tiny")
    grown = _trial_peak_rss(big) - _trial_peak_rss(small)
    # A load that touched the weights (mmap'd pages count in the resident set) would grow
    # by the file's size; the trial grows by the graph and tensor list only.
    assert grown < big.stat().st_size // 8, (grown, big.stat().st_size)


# -- the header checks for the decode's aborts, on their own -------------------------------------

def _header(**meta) -> GGUFHeader:
    return GGUFHeader(version=3, byte_order="little", metadata={"general.architecture": "qwen2", **meta})


def test_rope_dimensions_are_checked_against_the_head_size_as_llama_cpp_works_it_out():
    base = {"qwen2.embedding_length": 512, "qwen2.attention.head_count": 8}  # heads of 64
    assert header_problem(_header(**base, **{"qwen2.rope.dimension_count": 64})) is None
    assert header_problem(_header(**base, **{"qwen2.rope.dimension_count": 32})) is None  # partial rope
    assert "wider than an attention head (64)" in header_problem(_header(**base, **{"qwen2.rope.dimension_count": 66}))
    per_layer = {"qwen2.embedding_length": 512, "qwen2.attention.head_count": [4, 8]}  # the first layer's count
    assert "(128)" in header_problem(_header(**per_layer, **{"qwen2.rope.dimension_count": 130}))
    keyed = {**base, "qwen2.attention.key_length": 128}
    assert header_problem(_header(**keyed, **{"qwen2.rope.dimension_count": 128})) is None


def test_the_sliding_window_layers_rope_and_multi_rope_sections_are_checked():
    base = {"qwen2.attention.key_length": 128, "qwen2.attention.key_length_swa": 64}
    assert header_problem(_header(**base, **{"qwen2.rope.dimension_count_swa": 64})) is None
    assert "dimension_count_swa (128)" in header_problem(_header(**base, **{"qwen2.rope.dimension_count_swa": 128}))
    assert "even" in header_problem(_header(**base, **{"qwen2.rope.dimension_count_swa": 33}))
    assert header_problem(_header(**{"qwen2.rope.dimension_sections": [16, 24, 24, 0]})) is None
    assert "dimension_sections" in header_problem(_header(**{"qwen2.rope.dimension_sections": [0, 0, 0, 8]}))


def test_every_made_model_and_stories_pass_the_header_checks(shared_dir):
    for arch in ("llama", "gemma3", "lfm2", "mamba"):
        assert read_model_card(make_model(arch, "tiny")).error is None, arch
    assert read_model_card(shared_dir / "models" / "stories260K.gguf").error is None
