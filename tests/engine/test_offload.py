"""``-ngl auto``: each layer's cost from the GGUF header, checked against what llama.cpp
allocates, and the number of layers that fits the devices' free memory."""

from __future__ import annotations

import re
from collections import Counter

import pytest

from sessions.discovery.ggml_types import tensor_nbytes
from sessions.discovery.gguf_header import read_gguf_header
from sessions.llama.cache_types import bytes_per_value, type_id
from sessions.llama.offload import (
    F16_CACHE,
    RESERVE_BYTES,
    LayerCosts,
    accelerator_free_bytes,
    describe,
    kv_bytes_per_cell,
    layer_costs,
    offload_targets,
    resolve_gpu_layers,
    sliding_layers,
)
from tests.engine.conftest import ARCHS
from tests.gguf_support import make_gguf

ATTENTION_CACHES = {"llama": 1, "gemma3": 2, "lfm2": 1, "mamba": 0}
"""llama.cpp's K/V caches per model (gemma3: a sliding-window one and a full one); each
writes 12 bytes of cell metadata per token into a sequence state besides the keys and
values."""


def per_cell(path, cache_bytes=F16_CACHE) -> list[int]:
    return kv_bytes_per_cell(read_gguf_header(path).metadata, cache_bytes)


def layer_weights(path) -> list[int]:
    """Bytes of each repeating layer's tensors."""
    header = read_gguf_header(path)
    n_layer = header.metadata[f"{header.metadata['general.architecture']}.block_count"]
    weights = [0] * n_layer
    for tensor in header.tensors:
        if tensor.name.startswith("blk."):
            weights[int(tensor.name.split(".")[1])] += tensor_nbytes(tensor.type_id, tensor.n_elements)
    return weights


@pytest.mark.parametrize(("k", "v"), [("f16", "f16"), ("q8_0", "q4_0")])
@pytest.mark.parametrize("arch", ARCHS)
def test_each_token_of_context_costs_what_llama_cpp_stores_for_it(arch, model_paths, loaded_models, k, v):
    from sessions.llama.context import ContextParams, LlamaContext

    types = type_id(k), type_id(v)
    params = ContextParams(n_ctx=256, n_batch=32, type_k=types[0], type_v=types[1])
    ctx = LlamaContext(loaded_models[arch], params)
    try:
        ctx.decode([1] * 10, 0)
        before = ctx.state_size(0)
        ctx.decode([2], 10)
        grown = ctx.state_size(0) - before
    finally:
        ctx.close()
    cache_bytes = bytes_per_value(types[0]), bytes_per_value(types[1])
    assert grown == sum(per_cell(model_paths[arch], cache_bytes)) + 12 * ATTENTION_CACHES[arch]


@pytest.mark.parametrize("arch", ARCHS)
def test_the_layers_hold_every_weight_llama_cpp_loads_but_the_input_embeddings(arch, model_paths, loaded_models):
    path, model = model_paths[arch], loaded_models[arch]
    costs = layer_costs(path, 256)  # every layer, windowed or not, holds 256 cells then
    weights = sum(costs.blocks) - 256 * sum(per_cell(path))
    sizes = {t.name: tensor_nbytes(t.type_id, t.n_elements) for t in read_gguf_header(path).tensors}
    assert "output.weight" in sizes  # so the embeddings are not counted in the output layer
    assert weights + costs.output + sizes["token_embd.weight"] == model._L.llama_model_size(model.handle)


def test_a_split_model_is_costed_over_all_its_parts(tmp_path):
    tensors = {f"blk.{i}.attn_q.weight": ((4, 32), "F32") for i in range(5)}
    tensors |= {"token_embd.weight": ((8, 32), "F32"), "output_norm.weight": ((32,), "F32")}
    meta = {"llama.block_count": 5, "llama.attention.head_count": 4, "llama.attention.head_count_kv": 2,
            "llama.embedding_length": 32}
    make_gguf(tmp_path / "big.gguf", tensors=tensors, extra=meta, split_max_tensors=2)
    parts = sorted(tmp_path.glob("big-*-of-*.gguf"))
    assert len(parts) == 4
    costs = layer_costs(parts[0], 100)
    kv = 2 * (8 + 8) * 2 * 256  # 2 KV heads of 32 / 4 = 8 dimensions, F16 keys and values, 100 cells made 256
    assert costs.blocks == (4 * 32 * 4 + kv,) * 5
    assert costs.output == 32 * 4 + 8 * 32 * 4  # no output matrix: the embeddings are copied there


@pytest.mark.parametrize("arch", ARCHS)
def test_each_layer_is_costed_at_the_cells_llama_cpp_gives_it(arch, model_paths, loaded_models):
    """llama.cpp says what it allocates as it makes a context ("N cells, L layers" per
    cache): a context of 1,000 cells is made 1,024, and gemma3's windowed layers get a
    ring of 256 (a window of 32 for 2 sequences, plus a batch of 32, rounded up)."""
    from sessions.llama.context import ContextParams, LlamaContext
    from sessions.llama.native import log_lines

    path, n_ctx, n_batch = model_paths[arch], 1000, 32
    made: Counter[int] = Counter()

    def listen(_level: int, line: str) -> None:
        found = re.search(r"llama_kv_cache: size = .*?(\d+) cells, +(\d+) layers", line)
        if found:
            made[int(found[1])] += int(found[2])

    with log_lines(listen):
        LlamaContext(loaded_models[arch], ContextParams(n_ctx=n_ctx, n_batch=n_batch)).close()
    costed: Counter[int] = Counter()
    for cost, weight, per in zip(layer_costs(path, n_ctx, n_batch=n_batch).blocks, layer_weights(path),
                                 per_cell(path), strict=True):
        if per:
            cells, rest = divmod(cost - weight, per)
            assert rest == 0
            costed[cells] += 1
    assert costed == made
    assert set(made) == ({1024, 256} if arch == "gemma3" else {1024} if arch != "mamba" else set())


def test_sliding_layers_follow_the_architecture_or_the_file():
    gemma3 = {"general.architecture": "gemma3", "gemma3.attention.sliding_window": 1024}
    assert sliding_layers(gemma3, 12) == [True] * 5 + [False] + [True] * 5 + [False]
    assert sliding_layers({**gemma3, "gemma3.attention.sliding_window_pattern": 3}, 6) == [True, True, False] * 2
    flags = [True, False, False, True]
    assert sliding_layers({**gemma3, "gemma3.attention.sliding_window_pattern": flags}, 4) == flags
    gpt_oss = {"general.architecture": "gpt-oss", "gpt-oss.attention.sliding_window": 128}
    assert sliding_layers(gpt_oss, 4) == [True, False, True, False]
    # not sure, so every layer counts at the full context
    assert sliding_layers({**gemma3, "gemma3.attention.sliding_window_pattern": flags}, 5) == [False] * 5
    assert sliding_layers({**gemma3, "gemma3.attention.sliding_window": 0}, 6) == [False] * 6
    assert sliding_layers({"general.architecture": "gemma3"}, 6) == [False] * 6
    assert sliding_layers({"general.architecture": "llama4", "llama4.attention.sliding_window": 8192}, 4) == [False] * 4


def test_layers_fit_from_the_output_end():
    costs = LayerCosts(blocks=(10, 20, 30), output=5)
    assert [costs.fit(budget) for budget in (4, 5, 34, 35, 54, 55, 64, 65, 10**9)] == [0, 1, 1, 2, 2, 3, 3, -1, -1]


def test_numbers_and_all_are_taken_as_they_are(tmp_path):
    missing = tmp_path / "nothing.gguf"  # never read: nothing to fit
    assert [resolve_gpu_layers(choice, missing, 0, free=[1 << 40]) for choice in (0, 7, -1, "all")] == [0, 7, -1, -1]
    with pytest.raises(ValueError):
        resolve_gpu_layers("most", missing, 0, free=[1 << 40])


def test_auto_without_a_gpu_is_the_cpu_and_reads_nothing(tmp_path):
    assert resolve_gpu_layers("auto", tmp_path / "nothing.gguf", 0, free=[]) == 0


def test_auto_fits_the_free_memory_of_gpus_and_rpc_servers(model_paths):
    path = model_paths["llama"]
    costs = layer_costs(path, 2048)
    output, last = costs.output, costs.blocks[-1]
    assert resolve_gpu_layers("auto", path, 2048, free=[1 << 40]) == -1
    assert resolve_gpu_layers("auto", path, 2048, free=[], rpc_free=[1 << 40]) == -1
    assert resolve_gpu_layers("auto", path, 2048, free=[RESERVE_BYTES + output + last]) == 2
    # the reserve is kept on every device: two half-budgets hold what one whole one does, less a reserve
    assert resolve_gpu_layers("auto", path, 2048, free=[RESERVE_BYTES + output, RESERVE_BYTES + last]) == 2
    assert resolve_gpu_layers("auto", path, 2048, free=[RESERVE_BYTES + output + last, RESERVE_BYTES - 1]) == 2
    assert resolve_gpu_layers("auto", path, 2048, free=[RESERVE_BYTES]) == 0
    # a longer context leaves room for fewer layers
    small = RESERVE_BYTES + output + sum(costs.blocks)
    assert resolve_gpu_layers("auto", path, 2048, free=[small]) == -1
    assert resolve_gpu_layers("auto", path, 4096, free=[small]) < len(costs.blocks) + 1


def test_auto_leaves_a_damaged_file_to_the_loader(tmp_path):
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"GGUF" + b"\xff" * 60)
    assert resolve_gpu_layers("auto", bad, 0, free=[1 << 40]) == 0


def test_auto_on_this_machine_loads_as_the_cpu_did(model_paths):
    """Without a GPU, ``auto`` (the default) keeps the checkpoint key of ``-ngl 0``: the
    checkpoints saved before it are still found."""
    from sessions.engine.chat_engine import LlamaChatEngine
    from sessions.llama.context import ContextParams

    if accelerator_free_bytes():
        pytest.skip("this machine has a GPU: auto offloads to it")
    keys = []
    for choice in ("auto", 0):
        engine = LlamaChatEngine(model_paths["llama"], ContextParams(n_ctx=256, n_batch=32), n_gpu_layers=choice)
        try:
            keys.append(engine.ctx.params.compat())
            assert engine.placement is None or engine.placement.local_only
        finally:
            engine.close()
    assert keys[0] == keys[1]


def test_layers_go_to_discrete_gpus_or_else_integrated_ones():
    from sessions.llama.devices import Device

    cpu, blas = Device("CPU", "AMD EPYC", "CPU", 20, 32), Device("BLAS", "OpenBLAS", "accelerator", 20, 32)
    cuda, igpu = Device("CUDA0", "RTX", "GPU", 8, 12), Device("Vulkan1", "Radeon 780M", "iGPU", 4, 16)
    rpc = Device("RPC0", "10.0.0.2:50052", "RPC")
    assert offload_targets([cpu, blas, cuda, igpu, rpc]) == [8]  # llama.cpp leaves the iGPU out then
    assert offload_targets([cpu, igpu, rpc]) == [4]
    assert offload_targets([cpu, blas, rpc]) == []


def test_the_choice_in_words():
    assert [describe(c) for c in ("auto", "all", -1, 0, 1, 12)] == [
        "the layers that fit", "every layer", "every layer", "no layer", "1 layer", "12 layers"]
