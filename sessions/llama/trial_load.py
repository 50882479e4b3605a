"""A model's trial load, run in a child process by ``sessions.discovery.probe``.

``python -m sessions.llama.trial_load FILE`` loads the file on the CPU without reading its
tensor data (llama.cpp's ``no_alloc``: metadata, hyperparameters, vocabulary, every
tensor's name, type and shape, and the memory a load would take), then makes a small
context the same way, which builds the graph of a decode (every operation's shape
assertion in ``ggml.c`` runs there) and plans its memory without allocating it. Exit
status 0 when that works, ``REFUSED`` when llama.cpp refuses the file; a failed
``GGML_ASSERT`` ends the process with a signal instead, which is what the probe looks for.

What this covers, by where llama.cpp aborts:

- while loading (``load_hparams``, the vocabulary, the tensor list): a MoE expert count
  past the experts, a duplicated token, a layer count out of range, and whatever else the
  loader asserts: the same code runs here as in a real load;
- while building the graph (``ggml_*`` constructors asserting shapes): runs here, in the
  context's graph reservation, for a one-token batch and a full one;
- in the compute kernels of a decode (``ggml-cpu/ops.cpp``, asserting on values a model
  sets: norm epsilons, rope dimensions): not run here, since no tensor is read. Those
  values are all in the header and ``sessions.discovery.abort_checks`` refuses them
  before this child starts. Decoding a token for real would read every weight once more,
  a second full load on a model's first open.
"""

from __future__ import annotations

import sys

from sessions.llama.native import bindings_only
from sessions.trial_status import REFUSED

LOAD_MODE_NONE = 0
"""``LLAMA_LOAD_MODE_NONE``: ``no_alloc`` with mmap would assert (``load_tensors``)."""


def trial_load(path: str) -> int:
    """Load ``path``'s metadata and tensor list, and plan a small context's graph."""
    L = bindings_only()
    params = L.llama_model_default_params()
    params.n_gpu_layers = 0
    params.no_alloc = True
    params.load_mode = LOAD_MODE_NONE
    model = L.llama_model_load_from_file(path.encode(), params)
    if not model:
        return REFUSED
    cp = L.llama_context_default_params()
    cp.n_ctx, cp.n_batch, cp.n_ubatch = 64, 8, 8
    cp.n_threads = cp.n_threads_batch = 1
    ctx = L.llama_init_from_model(model, cp)
    if not ctx:
        L.llama_model_free(model)
        return REFUSED
    L.llama_free(ctx)
    L.llama_model_free(model)
    return 0


if __name__ == "__main__":
    sys.exit(trial_load(sys.argv[1]))
