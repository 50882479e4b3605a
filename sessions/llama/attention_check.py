"""Whether llama.cpp runs flash attention on the GPU that holds a model's layers.

llamachat makes its contexts with flash attention on: its checkpoints read and write V
untransposed, which only flash attention keeps (``state_blob``). On a GPU backend with
no flash-attention kernel for the model (CUDA has none for a head size of 160, for one),
llama.cpp then runs that operation on the CPU for every layer, with the layer's keys and
values copied across at each batch, and says nothing: prompts crawl, and nobody knows why.

llama.cpp checks for this only when flash attention is "auto" (``resolve_fused_ops``): it
reserves a graph, looks at which device the operation landed on, and turns flash
attention off when that is not the layer's own. ``flash_attention_verdict`` makes a small
throwaway context with "auto" to hear that verdict; the chat's own context is made with
"on", as ever, and the user is told where attention runs (``Placement.attention_notice``).
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from sessions.llama.native import held_errors, lib, log_lines

if TYPE_CHECKING:
    from sessions.llama.context import ContextParams
    from sessions.llama.model import LlamaModel

log = logging.getLogger(__name__)

_MISMATCH = re.compile(r"layer \d+ is assigned to device (\S+) but Flash Attention is assigned to device (\S+)")
_ENABLED = "Flash Attention enabled"
_DISABLED = "Flash Attention not supported"
PROBE_CELLS = 256
"""The probe context's size: the smallest llama.cpp makes (it pads to 256). Whether a
device has a kernel does not depend on it, and its few megabytes are freed at once."""


@dataclass(frozen=True)
class AttentionVerdict:
    """llama.cpp's verdict on flash attention for a model as it is placed."""

    supported: bool
    layer_device: str = ""
    """When not supported: the device of the first layer whose attention went elsewhere."""
    attention_device: str = ""
    """...and the device that runs it instead (``CPU``)."""


class VerdictLog:
    """Reads the verdict from llama.cpp's log lines while a context with "auto" is made."""

    def __init__(self) -> None:
        self.supported: bool | None = None
        self.devices = ("", "")

    def __call__(self, _level: int, line: str) -> None:
        found = _MISMATCH.search(line)
        if found:
            self.devices = (found[1], found[2])
        elif _DISABLED in line:
            self.supported = False
        elif _ENABLED in line:
            self.supported = True

    def verdict(self) -> AttentionVerdict | None:
        """None when llama.cpp gave none (it did not check)."""
        if self.supported is None:
            return None
        return AttentionVerdict(True) if self.supported else AttentionVerdict(False, *self.devices)


def flash_attention_verdict(model: LlamaModel, params: ContextParams) -> AttentionVerdict | None:
    """What llama.cpp says of flash attention for ``model``, placed as it was loaded, with
    the cache types of ``params``.

    None when it says nothing: the probe context could not be made (too little memory
    left, say; the chat's own context then reports why), or the V cache is quantized,
    for which llama.cpp turns flash attention on without checking.
    """
    L = lib()
    cp = L.llama_context_default_params()
    cp.n_ctx = PROBE_CELLS
    cp.n_batch = cp.n_ubatch = 1  # the check itself reserves a graph of one token
    cp.n_seq_max = 1
    cp.n_threads = cp.n_threads_batch = 1
    cp.flash_attn_type = L.LLAMA_FLASH_ATTN_TYPE_AUTO
    cp.type_k, cp.type_v = params.type_k, params.type_v
    cp.no_perf = True
    heard = VerdictLog()
    with held_errors() as errors, log_lines(heard):
        ctx = L.llama_init_from_model(model.handle, cp)
    if not ctx:
        log.debug("flash-attention check: no probe context (%s)", errors[-1] if errors else "no reason given")
        return None
    L.llama_free(ctx)
    return heard.verdict()
