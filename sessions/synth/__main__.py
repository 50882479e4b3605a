"""``python -m sessions.synth ARCH``: make a model (or find it in the cache) and print its path.

Benchmarks and shell scripts use this to get a model file without importing the package.
"""

from __future__ import annotations

import argparse
import sys

from .archs import ARCHS, SIZES
from .errors import SynthError
from .maker import make_model


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m sessions.synth",
        description="Make a deterministic random-weight GGUF model and print its path.",
    )
    parser.add_argument("arch", choices=ARCHS, help="architecture (kind of model memory)")
    parser.add_argument("--size", choices=SIZES, default="tiny",
                        help="tiny (tests, demo), bench (~100M) or gpu (~2B, 4 GB)")
    parser.add_argument("--swa-window", type=int, default=None,
                        help="sliding window in tokens (windowed architectures; default: the architecture's)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the random weights")
    parser.add_argument("--n-ctx-train", type=int, default=8192, help="training context written in the file")
    args = parser.parse_args(argv)
    try:
        path = make_model(
            args.arch, args.size, swa_window=args.swa_window, seed=args.seed, n_ctx_train=args.n_ctx_train
        )
    except SynthError as error:
        print(f"cannot make the model: {error}", file=sys.stderr)
        return 2
    print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
