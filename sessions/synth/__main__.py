"""``python -m sessions.synth ARCH``: make a model (or find it in the cache) and print its path.

Benchmarks and shell scripts use this to get a model file without importing the package.
``--shape NAME`` makes a real model's memory shape on a thin body instead (the architecture
follows from the name), and ``--shapes`` lists them with the bytes their memory holds.
"""

from __future__ import annotations

import argparse
import sys

from .archs import ARCHS, SIZES, model_spec
from .errors import SynthError
from .maker import make_model
from .memory_bytes import memory_bytes
from .shapes import SHAPES


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m sessions.synth",
        description="Make a deterministic random-weight GGUF model and print its path.",
    )
    parser.add_argument("arch", nargs="?", choices=ARCHS, help="architecture (kind of model memory)")
    parser.add_argument("--size", choices=SIZES, default="tiny",
                        help="tiny (tests, demo), bench (~100M) or gpu (~2B, 4 GB)")
    parser.add_argument("--shape", choices=tuple(SHAPES),
                        help="a released model's KV and state shape on a thin body (instead of --size)")
    parser.add_argument("--shapes", action="store_true", help="list the shapes and the bytes their memory holds")
    parser.add_argument("--swa-window", type=int, default=None,
                        help="sliding window in tokens (windowed architectures; default: the architecture's)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the random weights")
    parser.add_argument("--n-ctx-train", type=int, default=8192, help="training context written in the file")
    args = parser.parse_args(argv)
    if args.shapes:
        _list_shapes()
        return 0
    if args.shape:
        if args.arch not in (None, SHAPES[args.shape].arch):
            parser.error(f"the shape {args.shape} is a {SHAPES[args.shape].arch} model, not {args.arch}")
        arch, size = SHAPES[args.shape].arch, args.shape
    elif args.arch is None:
        parser.error("name an architecture, or a shape with --shape")
    else:
        arch, size = args.arch, args.size
    try:
        path = make_model(arch, size, swa_window=args.swa_window, seed=args.seed, n_ctx_train=args.n_ctx_train)
    except SynthError as error:
        print(f"cannot make the model: {error}", file=sys.stderr)
        return 2
    print(path)
    return 0


def _list_shapes() -> None:
    print("SHAPE                ARCH           KV/TOKEN  WINDOW          WINDOW BYTES  STATE BYTES  MODEL")
    for name, shape in SHAPES.items():
        found = memory_bytes(model_spec(shape.arch, name))
        window = f"{found.window} x {found.window_kv_per_token}" if found.window else "-"
        print(f"{name:<20} {shape.arch:<14} {found.kv_per_token:>8}  {window:<14} {found.window_bytes:>13}"
              f"  {found.state:>11}  {shape.model}")


if __name__ == "__main__":
    sys.exit(main())
