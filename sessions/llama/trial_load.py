"""A model's trial load, run in a child process by ``sessions.discovery.probe``.

``python -m sessions.llama.trial_load FILE`` loads the file on the CPU, makes a small
context and decodes one token: exit status 0 when that works, ``REFUSED`` when llama.cpp
refuses the file; a failed ``GGML_ASSERT`` ends the process with a signal instead, which
is what the probe looks for.
"""

from __future__ import annotations

import ctypes
import sys

from sessions.discovery.probe import REFUSED
from sessions.llama.native import lib


def trial_load(path: str) -> int:
    """Load ``path``, make a small context, decode one token."""
    L = lib()
    params = L.llama_model_default_params()
    params.n_gpu_layers = 0
    model = L.llama_model_load_from_file(path.encode(), params)
    if not model:
        return REFUSED
    cp = L.llama_context_default_params()
    cp.n_ctx, cp.n_batch, cp.n_ubatch = 64, 8, 8
    cp.n_threads = cp.n_threads_batch = 1
    ctx = L.llama_init_from_model(model, cp)
    if not ctx:
        return REFUSED
    token = (ctypes.c_int32 * 1)(0)
    rc = L.llama_decode(ctx, L.llama_batch_get_one(token, 1))
    L.llama_free(ctx)
    L.llama_model_free(model)
    return 0 if rc == 0 else REFUSED


if __name__ == "__main__":
    sys.exit(trial_load(sys.argv[1]))
