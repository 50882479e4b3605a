"""``llamachat serve`` and llama-server side by side, on W1 as a chat client sends it.

Run: ``python -m tests.bench.serve_compare --server PATH/llama-server [--arch gemma3 lfm2 qwen35]
[--model PATH] [--threads N] [--ngl N]``. Build the server from the llama.cpp that
llama-cpp-python vendors, with the same backend flags (see ``server_compare``).

Each server gets its own client, which sends every request stateless, with the whole
history, to ``/v1/chat/completions`` at temperature 0: W1's 12-turn chat and its last
question; then W1's six events as a front end sends them, each followed by a swipe (the
same request again): an edit of user turn 2, 6 and 11 (the history up to it, the turn
edited), and after each a switch back to the first branch with a new question (the
whole first branch, the replies the server wrote on it, the question). Both servers are
stopped and started again halfway, after the third event and its swipe; llama-server
keeps its prompt cache and context checkpoints at their defaults, in RAM. Each client
sends back its own server's replies, as a front end does. Both servers run at once and
each request goes to one right after the other, so that a busy machine slows both alike. Both run with the same context
(8,192 tokens, batch and micro-batch 512, flash attention, one sequence), threads and
offloaded layers; each request's prompt is timed by the server itself (``timings``:
``prompt_n`` tokens processed in ``prompt_ms``). Prints one JSON line per request and a
summary per model: the requests after the first (which both evaluate whole), restart
included, with the goal of a prompt time at least 10 times llama-server's smaller.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import tempfile
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path

from tests.bench.branching import emit, models
from tests.bench.server_compare import Server
from tests.bench.workload import w1_texts

REPLY_TOKENS = 32
N_CTX = 8192
GOAL = 10.0
"""llama-server's prompt time over ours, over the requests after the first, restart included."""

Messages = list[dict[str, str]]


def w1_requests(texts: dict) -> list[tuple[str, Callable[[list[str]], Messages]]]:
    """W1 as a client sends it: (name, the request built from this client's replies so far)."""
    system = [{"role": "system", "content": texts["system"]}]

    def turns(count: int) -> Messages:
        done: Messages = []
        for k in range(count):
            done += [{"role": "user", "content": texts["users"][k]}, {"role": "assistant", "content":
                                                                       texts["replies"][k]}]
        return done

    def user(text: str) -> dict[str, str]:
        return {"role": "user", "content": text}

    def first_branch(replies: list[str], questions: int) -> Messages:
        """The 12 turns, the last one asked, then ``questions`` follow-ups with their replies."""
        branch = [*system, *turns(11), user(texts["users"][11])]
        for k in range(questions):
            branch += [{"role": "assistant", "content": replies[k]}, user(texts["follow_ups"][k])]
        return branch

    steps: list[tuple[str, Callable[[list[str]], Messages]]] = [
        ("the 12-turn chat and its last question", lambda r: first_branch(r, 0))]
    for event, turn in enumerate((2, 6, 11)):
        def edited(r: list[str], turn: int = turn) -> Messages:
            return [*system, *turns(turn - 1), user(texts["edits"][turn])]

        def back(r: list[str], event: int = event) -> Messages:
            return first_branch(r, event + 1)

        steps += [(f"edit user turn {turn}", edited), (f"swipe after edit {turn}", edited),
                  (f"switch back after edit {turn} + next question", back), (f"swipe after switch {turn}", back)]
    return steps


RESTART_AFTER = 9
"""The requests before the restart of both servers: the chat, then three events and their swipes."""


class Ours:
    """``llamachat serve`` on the model, with its data dir under ``root``."""

    def __init__(self, model: Path, threads: int, ngl: int | str, root: Path) -> None:
        from tests.serve.server_process import ServeProcess

        os.environ.update(LLAMACHAT_DATA_DIR=str(root / "data"), LLAMACHAT_CACHE_DIR=str(root / "cache"),
                          LLAMACHAT_CONFIG=str(root / "config.toml"))
        self.process = ServeProcess(model, "-c", str(N_CTX), "-t", str(threads), "-ngl", str(ngl), "--temp", "0",
                                    "--max-tokens", str(REPLY_TOKENS), "--timeout", "3600")
        self.url = self.process.url

    def close(self) -> None:
        status = self.process.stop(signal.SIGTERM)
        if status != 0:
            raise SystemExit(f"llamachat serve ended with {status}: {self.process.stderr[-2000:]}")


class Theirs:
    """llama-server on the model (``server_compare.Server``)."""

    def __init__(self, binary: Path, model: Path, threads: int, ngl: int | str, root: Path) -> None:
        self.server = Server(binary, model, threads, ngl, root / "llama-server.log")
        self.url = f"http://127.0.0.1:{self.server.port}"

    def close(self) -> None:
        self.server.close()


def ask(url: str, messages: Messages) -> dict:
    """One chat request, stateless; the response."""
    body = json.dumps({"messages": messages, "max_tokens": REPLY_TOKENS, "temperature": 0.0}).encode()
    request = urllib.request.Request(f"{url}/v1/chat/completions", data=body,
                                     headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=3600) as answer:
            return json.loads(answer.read())
    except urllib.error.HTTPError as error:
        raise SystemExit(f"{url} refused a request: {error.read()[:500]!r}") from error


class Client:
    """One server's client: the replies it was sent, as a front end keeps them."""

    def __init__(self, side: str, start: Callable[[], Ours | Theirs]) -> None:
        self.side = side
        self.start = start
        self.server: Ours | Theirs | None = None
        self.replies: list[str] = []
        self.records: list[dict] = []

    def send(self, name: str, build: Callable[[list[str]], Messages], after_restart: bool) -> None:
        assert self.server is not None
        answer = ask(self.server.url, build(self.replies))
        if name.startswith("the 12-turn") or "next question" in name:
            self.replies.append(answer["choices"][0]["message"]["content"] or "")  # sent back with the next question
        timings = answer["timings"]
        self.records.append({"request": name, "prompt_tokens": answer["usage"]["prompt_tokens"],
                             "prompt_n": timings["prompt_n"], "prompt_seconds": round(timings["prompt_ms"] / 1e3, 4),
                             "after_restart": after_restart})

    def restart(self) -> None:
        self.close()
        self.server = self.start()

    def close(self) -> None:
        if self.server is not None:
            self.server.close()
            self.server = None


def run_both(label: str, clients: list[Client], steps: list) -> None:
    """The trace through both servers, request by request: each request goes to one, then
    the other (in turns, first one then the other first), so that both meet the machine
    as it is that minute; both are started again after ``RESTART_AFTER`` requests."""
    try:
        for client in clients:
            client.restart()
        for index, (name, build) in enumerate(steps):
            if index == RESTART_AFTER:
                for client in clients:
                    client.restart()
            for client in clients if index % 2 == 0 else reversed(clients):
                client.send(name, build, index >= RESTART_AFTER)
    finally:
        for client in clients:
            client.close()
    for client in clients:
        for record in client.records:
            emit({"model": label, "server": client.side, **record})


def compare(label: str, model: Path, binary: Path, threads: int, ngl: int | str, root: Path) -> dict:
    from sessions.llama.model import LlamaModel

    sizing = LlamaModel(model)
    try:
        texts = w1_texts(lambda text, bos: sizing.tokenize(text, add_bos=bos))
    finally:
        sizing.close()
    steps = w1_requests(texts)
    clients = [Client("llamachat serve", lambda: Ours(model, threads, ngl, root / "ours")),
               Client("llama-server", lambda: Theirs(binary, model, threads, ngl, root))]
    run_both(label, clients, steps)
    ours, theirs = clients[0].records, clients[1].records
    later = slice(1, None)
    our_seconds = sum(r["prompt_seconds"] for r in ours[later])
    their_seconds = sum(r["prompt_seconds"] for r in theirs[later])
    summary = {
        "model": label, "event": "serve vs llama-server: W1 as a client sends it, swipes, a restart halfway",
        "requests": len(steps) - 1,
        "our_prompt_tokens_processed": sum(r["prompt_n"] for r in ours[later]),
        "server_prompt_tokens_processed": sum(r["prompt_n"] for r in theirs[later]),
        "our_prompt_seconds": round(our_seconds, 3), "server_prompt_seconds": round(their_seconds, 3),
        "server_over_ours": round(their_seconds / max(our_seconds, 1e-9), 1), "goal_server_over_ours": GOAL,
        "after_restart_our_seconds": round(sum(r["prompt_seconds"] for r in ours[later] if r["after_restart"]), 3),
        "after_restart_server_seconds": round(sum(r["prompt_seconds"] for r in theirs[later] if r["after_restart"]),
                                              3),
        "first_request_tokens": ours[0]["prompt_tokens"],
        "first_request_our_seconds": ours[0]["prompt_seconds"],
        "first_request_server_seconds": theirs[0]["prompt_seconds"],
    }
    emit(summary)
    return summary


def main(argv: list[str] | None = None) -> int:
    from sessions.cli.arguments import gpu_layers
    from sessions.synth import ARCHS, SIZES

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--server", type=Path, required=True, help="a llama-server binary")
    parser.add_argument("--arch", nargs="*", default=None,
                        help="made bench models (default: those of gemma3, lfm2, qwen35 that sessions.synth makes)")
    parser.add_argument("--model", action="append", default=[], metavar="PATH", help="a GGUF file (repeatable)")
    parser.add_argument("--size", choices=SIZES, default="bench")
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 2)
    parser.add_argument("--ngl", type=gpu_layers, default=0,
                        help="layers offloaded to this machine's GPUs (both sides): a number, auto or all")
    args = parser.parse_args(argv)
    if not os.access(args.server, os.X_OK):
        parser.error(f"{args.server} is not an executable llama-server")
    if args.arch is None:
        args.arch = [] if args.model else [arch for arch in ("gemma3", "lfm2", "qwen35") if arch in ARCHS]
    from sessions import paths

    os.environ.setdefault("LLAMACHAT_MODEL_CACHE", str(paths.made_models_dir()))
    for label, path in models(args):
        with tempfile.TemporaryDirectory(prefix="llamachat-serve-bench-") as tmp:
            compare(label, path, args.server, args.threads, args.ngl, Path(tmp))
    return 0


if __name__ == "__main__":
    sys.exit(main())
