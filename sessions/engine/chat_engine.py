"""The engine as the session controller sees it: one model, one context, its checkpoints.

``ChatEngine`` is the protocol the controller programs against; ``LlamaChatEngine`` is
the real one over llama.cpp, and the UI tests use a fake with the same shape. Loading
happens in the constructor, so callers run it in a worker thread. What the branch
engine and the bindings answer is handed on in the engine's own words (``reports``).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from sessions.branching import branch_engine, planner, warm_ahead
from sessions.branching.branch_engine import BranchEngine
from sessions.branching.restore_reads import disk_sizes, learn_layouts, snapshot_sizes
from sessions.branching.versions import sample_versions
from sessions.checkpoints import CheckpointStore
from sessions.discovery.layout_checks import record_check
from sessions.engine.protocol import ChatEngine as ChatEngine
from sessions.engine.reports import Generated, LoadedModel, Prepared, ProgressFn, Rates, RoutePlan, Tier, WarmedAhead
from sessions.llama.attention_check import flash_attention_verdict
from sessions.llama.cache_types import bytes_per_value
from sessions.llama.context import ContextParams, LlamaContext
from sessions.llama.detokenizer import Detokenizer
from sessions.llama.fingerprint import model_fingerprint
from sessions.llama.layout_check import layout_problem
from sessions.llama.model import LlamaModel, ModelInfo
from sessions.llama.offload import GpuLayers, resolve_gpu_layers
from sessions.llama.restore_memory import RestoreMemory
from sessions.llama.sampler import Sampler
from sessions.rpc.backend import add_servers
from sessions.rpc.endpoints import check_offload
from sessions.rpc.errors import RpcError
from sessions.sampling import SamplingSettings
from sessions.templates.choice import choose_template
from sessions.templates.families import ALL_MARKERS
from sessions.templates.override import TemplateOverride


class LlamaChatEngine:
    """A GGUF model in llama.cpp with branch-aware checkpointing.

    ``rpc`` servers are probed and added to this process's device registry before the
    model loads (for good: see ``sessions.rpc.backend``); ``n_gpu_layers`` and
    ``tensor_split`` then place layers on them as llama.cpp does. ``n_gpu_layers`` may
    also be ``"all"`` or ``"auto"``, which is resolved here, with the servers' free
    memory from their probe (``sessions.llama.offload``). ``parking``: bytes of the
    device's memory for branches left a moment ago (``sessions.branching.live``).
    """

    def __init__(
        self,
        model_path: str | Path,
        params: ContextParams = ContextParams(),
        *,
        n_gpu_layers: GpuLayers = 0,
        tensor_split: Sequence[float] = (),
        rpc: Sequence[str] = (),
        checkpoints: CheckpointStore | None = None,
        interval: int = 2048,
        parking: int = 0,
        on_progress: Callable[[float], None] | None = None,
        template_override: TemplateOverride | None = None,
        template_variables: Mapping[str, Any] | None = None,
    ) -> None:
        t0 = time.perf_counter()
        rpc_free: list[int] = []
        if rpc:
            check_offload(rpc, n_gpu_layers)
            rpc_free = [device.free_bytes for server in add_servers(rpc) for device in server.devices]
        cache_bytes = bytes_per_value(params.type_k), bytes_per_value(params.type_v)
        n_gpu_layers = resolve_gpu_layers(n_gpu_layers, model_path, params.n_ctx, rpc_free=rpc_free,
                                          cache_bytes=cache_bytes, n_batch=params.n_batch)
        if rpc and n_gpu_layers == 0:  # "auto" found no room

            raise RpcError("the free memory of the RPC servers holds no layer of this model with its context "
                           "(-ngl auto): pass -ngl N to offload N layers anyway, or a smaller context (-c)")
        memory = RestoreMemory()
        store = checkpoints
        if store is not None:  # touched while the model loads, for a first restore at once
            memory.prepare(lambda: disk_sizes(store, model_fingerprint(model_path)))
        self.model = LlamaModel(model_path, n_gpu_layers=n_gpu_layers, tensor_split=tensor_split,
                                on_progress=on_progress)
        info = self.model.info
        if store is not None:
            memory.prepare(lambda: snapshot_sizes(store, info, params))
        self.placement = self.model.placement
        if rpc and self.placement is not None and not self.placement.rpc_endpoints:
            self.model.close()

            raise RpcError("llama.cpp put no layer on the RPC servers (its device list does not show them)")
        devices = self.placement.key() if self.placement is not None else (
            f"ngl={n_gpu_layers};ts={list(tensor_split)};rpc={list(rpc)}" if n_gpu_layers or rpc else "")
        try:
            if self.placement is not None and self.placement.on_local_gpu:  # a failure closes the model too
                verdict = flash_attention_verdict(self.model, params)
                if verdict is not None and not verdict.supported:
                    self.placement = replace(self.placement,
                                             attention_elsewhere=(verdict.layer_device, verdict.attention_device))
            self.ctx = LlamaContext(self.model, replace(params, devices=devices, n_gpu_layers=n_gpu_layers), memory)
        except BaseException:
            self.model.close()
            raise
        self.ctx.stop_between_batches = bool(rpc)
        self.info = loaded_model(self.model.info)
        self.n_ctx = self.ctx.n_ctx
        self.checkpoint_notice: str | None = None
        """Why this model runs without checkpoints although they are on (None: it has them)."""
        if checkpoints is not None:
            problem = layout_problem(self.ctx, info.kind)
            record_check(model_path, problem)  # for `llamachat models`, which loads nothing
            if problem is not None:
                checkpoints = None
                self.checkpoint_notice = (f"{info.name} runs without checkpoints: {problem}; replies are written and "
                                          "stored as usual, but every switch and reopen evaluates its branch again")
        # Branches are parked whole only in a device's memory (on the CPU alone the RAM tier
        # holds them at the same cost), and only where checkpoints are kept at all.
        parked = parking if n_gpu_layers and checkpoints is not None else 0
        self.branches = BranchEngine(self.model, self.ctx, checkpoints, interval=interval, parking=parked)
        if checkpoints is not None:
            memory.reader().submit(learn_layouts, self.branches)
        self.template = choose_template(
            self.info.chat_template, self.model.special_tokens(ALL_MARKERS), override=template_override,
            bos_token=self.info.bos_text, eos_token=self.info.eos_text, variables=template_variables,
        )
        self.load_seconds = time.perf_counter() - t0

    @property
    def devices(self) -> str:
        return self.placement.summary() if self.placement is not None else ""

    @property
    def attention_notice(self) -> str | None:
        return self.placement.attention_notice() if self.placement is not None else None

    def tokenize(self, text: str, add_bos: bool) -> list[int]:
        return self.model.tokenize(text, add_bos=add_bos, parse_special=True)

    def detokenize(self, tokens: Sequence[int]) -> str:
        detok = Detokenizer(self.model.piece)
        for token in tokens:
            detok.push(token)
        detok.finish()
        return detok.text

    def plan(self, target: Sequence[int], ends: Sequence[int], *, need_logits: bool = True,
             stepped: Sequence[bool] | None = None) -> RoutePlan:
        return route_plan(self.branches.plan(target, ends, need_logits=need_logits, stepped=stepped))

    def prepare(
        self, target: Sequence[int], ends: Sequence[int], stepped: Sequence[bool] | None = None,
        on_progress: ProgressFn | None = None, *, reply_follows: bool = False, need_logits: bool = True,
    ) -> Prepared:
        return prepared(self.branches.prepare(
            target, ends, stepped=stepped, on_progress=on_progress, reply_follows=reply_follows,
            need_logits=need_logits,
        ))

    def generate(self, logits: np.ndarray, settings: SamplingSettings, *, max_tokens: int,
                 on_text: Callable[[str], None] | None = None,
                 should_stop: Callable[[], bool] = lambda: False) -> Generated:
        sampler = Sampler(settings, self.info.n_vocab)
        try:
            return generated(self.branches.generate(
                logits, sampler, max_tokens=max_tokens, on_text=on_text, should_stop=should_stop, save=False
            ))
        finally:
            sampler.close()

    def save_checkpoints(self) -> None:
        """The checkpoints the last ``prepare`` and ``generate`` left to take, read out and
        handed to the store (``Captures.flush``): a checkpoint that cannot be read out is
        told (``checkpoint_trouble``), never raised."""
        self.branches.captures.flush()

    def generate_versions(self, logits: np.ndarray, settings: Sequence[SamplingSettings], *, max_tokens: int,
                          on_text: Callable[[int, str], None] | None = None,
                          should_stop: Callable[[], bool] = lambda: False) -> list[Generated]:
        samplers = [Sampler(one, self.info.n_vocab) for one in settings]
        try:
            return [generated(one) for one in sample_versions(self.branches, logits, samplers, max_tokens=max_tokens,
                                                              on_text=on_text, should_stop=should_stop)]
        finally:
            for sampler in samplers:
                sampler.close()

    def warm_ahead(self, target: Sequence[int], ends: Sequence[int], should_stop: Callable[[], bool], *,
                   planned: Callable[[], None] | None = None) -> WarmedAhead:
        return warmed(self.branches.warm_ahead(target, ends, should_stop, planned=planned))

    def saved_tiers(self, prefixes: Sequence[str]) -> list[Tier | None]:
        """Where the state after each token prefix with these hashes is checkpointed."""
        return [self.branches.saved_tier(prefix) for prefix in prefixes]

    def request_abort(self) -> None:
        self.ctx.request_abort()

    def clear_abort(self) -> None:
        self.ctx.clear_abort()

    def close(self) -> None:
        """Free the model, with the checkpoints a job left to read out saved first (a reply
        stopped before its first token leaves its prompt's)."""
        try:
            self.branches.captures.flush()
        finally:
            self.ctx.close()
            self.model.close()


# -- the branch engine's and the bindings' answers, in the engine's own words ---------------


def loaded_model(info: ModelInfo) -> LoadedModel:
    return LoadedModel(path=info.path, fingerprint=info.fingerprint, name=info.name, architecture=info.architecture,
                       n_params=info.n_params, n_vocab=info.n_vocab, n_ctx_train=info.n_ctx_train, n_swa=info.n_swa,
                       kind=info.kind, chat_template=info.chat_template, bos_text=info.bos_text,
                       eos_text=info.eos_text, add_bos=info.add_bos, size_bytes=info.size_bytes)


def route_plan(plan: planner.Plan) -> RoutePlan:
    cost = plan.cost
    parts: list[planner.SegmentInfo | planner.SnapshotInfo] = [*plan.restore]
    parts += [part for part in (plan.rewind, plan.snapshot) if part is not None]
    return RoutePlan(keep=plan.keep, evaluate_from=plan.evaluate_from, target_len=plan.target_len,
                     tokens_restored=plan.tokens_restored,
                     ram_bytes=sum(part.nbytes for part in parts if part.tier == "ram"),
                     disk_bytes=sum(part.nbytes for part in parts if part.tier != "ram"),
                     estimate_seconds=plan.estimate_seconds,
                     rates=Rates(cost.eval_per_token, cost.step_seconds, cost.ram_seconds_per_byte,
                                 cost.disk_seconds_per_byte, cost.measured))


def prepared(result: branch_engine.PrepareResult) -> Prepared:
    return Prepared(result.logits, route_plan(result.plan), result.tokens_restored, result.tokens_evaluated,
                    result.seconds, result.bytes_restored, result.tokens_unparked, result.decode_seconds,
                    result.overhead_cpu_seconds, result.state_seconds)


def generated(result: branch_engine.GenerateResult) -> Generated:
    return Generated(result.tokens, result.text, result.stop_reason, result.first_token_at, result.seconds)


def warmed(result: warm_ahead.WarmedAhead) -> WarmedAhead:
    return WarmedAhead(result.nbytes, result.segments, result.in_ram, result.left, result.stopped)
