"""W1 through llama-server: the same prompts, in the same order, against our prompt times.

Run: ``python -m tests.bench.server_compare --server PATH/llama-server [--arch gemma3 lfm2]
[--model PATH] [--threads N] [--ngl N]``. Build the server from the llama.cpp that
llama-cpp-python vendors, with the same backend flags (``cmake -DGGML_CUDA=on`` on a GPU),
so that both sides run the same kernels.

For each model it runs W1 as ``tests.bench.branching`` does (the 12-turn chat in one
prefill, then six branch events, each timed by the controller), then starts llama-server
on the same file with the same context (8,192 tokens, batch and micro-batch 512, flash
attention on, one slot, the same threads and offloaded layers; its prompt cache and
context checkpoints at their defaults) and sends it the same token ids: the chat, then
each event's prompt. Each is sent with nothing to generate and timed by the server
itself (``timings``: ``prompt_n`` tokens processed in ``prompt_ms``). After an event the
prompt followed by the reply our engine wrote is sent as well, untimed, so that the
server holds what our engine held when the next event comes, as in a chat with the same
replies. Prints one JSON line per event and a summary per model.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from sessions.synth import SIZES
from tests.bench import workload
from tests.bench.branching import Bench, emit, models
from tests.rpc.servers import free_port

START_SECONDS = 300.0
"""How long the server may take to load a model and answer ``/health``."""


@dataclass(frozen=True)
class Prompt:
    """One prompt as our engine saw it, and the reply it wrote after it (none for the build)."""

    event: str
    tokens: list[int]
    reply: list[int]
    our_seconds: float
    our_evaluated: int


def w1_prompts(bench: Bench) -> list[Prompt]:
    """The build and the six events of the W1 run ``bench`` just made, as token ids."""
    from sessions.controller.branch_tokens import branch_tokens

    tree = bench.ctl.snapshot().tree

    def tokens(message_id: int) -> list[int]:
        return branch_tokens(bench.store, bench.ctl.engine, tree.path_to(message_id))[0]

    built = tokens(bench.built)
    prompts = [Prompt("build: one prefill of the 12-turn chat", built, [], bench.build_seconds, len(built))]
    for message_id, reply_id, record in bench.events:
        reply = bench.store.get_tokens(reply_id, bench.fingerprint) or []
        prompts.append(Prompt(record["event"], tokens(message_id), reply, record["prompt_seconds"],
                              record["tokens_evaluated"]))
    return prompts


class Server:
    """A llama-server process on a free loopback port, with our context settings."""

    def __init__(self, binary: Path, model: Path, threads: int, ngl: int | str, log: Path) -> None:
        self.port = free_port()
        command = [str(binary), "-m", str(model), "--host", "127.0.0.1", "--port", str(self.port),
                   "-c", "8192", "-b", "512", "-ub", "512", "-fa", "on", "-np", "1", "-t", str(threads),
                   "-ngl", str(ngl), "--no-webui"]
        self._log = log.open("w")
        self.process = subprocess.Popen(command, stdout=self._log, stderr=subprocess.STDOUT)
        try:
            self._wait_ready()
        except BaseException:
            self.close()
            raise

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + START_SECONDS
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise SystemExit(f"llama-server exited with {self.process.returncode}; see {self._log.name}")
            with contextlib.suppress(OSError):
                with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/health", timeout=5) as answer:
                    if answer.status == 200:
                        return
            time.sleep(0.2)  # polling a process we do not control: there is no event to wait on
        raise SystemExit(f"llama-server was not ready after {START_SECONDS:g} s; see {self._log.name}")

    def prompt(self, tokens: list[int]) -> dict:
        """Process ``tokens`` through the slot's cache, generating nothing; the server's timings."""
        body = json.dumps({"prompt": tokens, "n_predict": 0, "cache_prompt": True, "temperature": 0.0}).encode()
        request = urllib.request.Request(f"http://127.0.0.1:{self.port}/completion", data=body,
                                         headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=3600) as answer:
                return json.loads(answer.read())["timings"]
        except urllib.error.HTTPError as error:
            raise SystemExit(f"llama-server refused a prompt: {error.read()[:500]!r}") from error

    def close(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self._log.close()


def compare(label: str, prompts: list[Prompt], server: Server) -> dict:
    """Send ``prompts`` to ``server`` in order; one record per prompt, and the summary."""
    events = []
    for prompt in prompts:
        timings = server.prompt(prompt.tokens)
        record = {"model": label, "event": f"llama-server: {prompt.event}", "prompt_tokens": len(prompt.tokens),
                  "server_prompt_n": timings["prompt_n"],
                  "server_prompt_seconds": round(timings["prompt_ms"] / 1e3, 4),
                  "our_tokens_evaluated": prompt.our_evaluated, "our_prompt_seconds": round(prompt.our_seconds, 4)}
        emit(record)
        events.append(record)
        if prompt.reply:
            server.prompt(prompt.tokens + prompt.reply)  # the reply, as our engine holds it now
    branch_events = events[1:]
    ours = sum(e["our_prompt_seconds"] for e in branch_events)
    theirs = sum(e["server_prompt_seconds"] for e in branch_events)
    build = events[0]
    summary = {
        "model": label, "event": "llama-server: W1 summary",
        "server_prompt_seconds": round(theirs, 3),
        "server_tokens_processed": sum(e["server_prompt_n"] for e in branch_events),
        "our_prompt_seconds": round(ours, 3),
        "our_tokens_evaluated": sum(e["our_tokens_evaluated"] for e in branch_events),
        "server_over_ours": round(theirs / max(ours, 1e-9), 2), "goal_server_over_ours": 5.0,
        "build_server_seconds": build["server_prompt_seconds"], "build_our_seconds": build["our_prompt_seconds"],
        "build_ours_over_server": round(build["our_prompt_seconds"] / max(build["server_prompt_seconds"], 1e-9), 3),
        "goal_build_ours_over_server": 1.1,
    }
    emit(summary)
    return summary


def main(argv: list[str] | None = None) -> int:
    from sessions.cli.arguments import gpu_layers

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--server", type=Path, required=True, help="a llama-server binary")
    parser.add_argument("--arch", nargs="*", default=None, help="made bench models (default: gemma3 lfm2)")
    parser.add_argument("--model", action="append", default=[], metavar="PATH", help="a GGUF file (repeatable)")
    parser.add_argument("--size", choices=SIZES, default="bench")
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 2)
    parser.add_argument("--ngl", type=gpu_layers, default=0,
                        help="layers offloaded to this machine's GPUs (both sides): a number, auto or all")
    workload.add_scale_flag(parser)
    args = parser.parse_args(argv)
    workload.set_scale(args.w1_scale)
    if not os.access(args.server, os.X_OK):
        parser.error(f"{args.server} is not an executable llama-server")
    if args.arch is None:
        args.arch = [] if args.model else ["gemma3", "lfm2"]
    from sessions import paths

    os.environ.setdefault("LLAMACHAT_MODEL_CACHE", str(paths.made_models_dir()))
    for label, path in models(args):
        with tempfile.TemporaryDirectory(prefix="llamachat-bench-") as tmp:
            root = Path(tmp)
            os.environ["LLAMACHAT_CACHE_DIR"] = str(root / "cache")
            bench = Bench(label, path, args.threads, 32, root, ngl=args.ngl)
            bench.run_w1()
            prompts = w1_prompts(bench)
            bench.close()
            server = Server(args.server, path, args.threads, args.ngl, root / "llama-server.log")
            try:
                compare(label, prompts, server)
            finally:
                server.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
