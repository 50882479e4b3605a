"""The GPU check: everything issue #32 asks of a device machine, in one command.

On a fresh device machine (no network; Python 3.12, CUDA with nvcc, CMake, ninja), in the
repo root, with the pack that ``tests/bench/gpu_pack.sh`` made in ``.gpupack``:

    python3 -m tests.bench.gpu_check

builds the vendored llama.cpp once with CUDA (the libraries llama-cpp-python loads, and
llama-server), installs the wheels and llama-cpp-python's Python code over those
libraries, makes ``--size gpu`` models (gemma3, lfm2, llama, mamba), and runs the
exactness check of every restore route (``tests.bench.gpu_exactness``), ``server_compare``
against the llama-server it built, the branching benchmark, and several versions of a
reply in one batch (``tests.bench.batched_versions``), all with every layer on the GPU.
It writes ``gpu_check.json`` (the figures) and ``gpu_check.log`` (every command's
output) to ``$OUT`` (else ``.gpucheck/out``) as it goes: the JSON is rewritten after
every step and every line a benchmark prints, so a run cut short still returns what it
measured. Each step has its own time limit, and all of them share ``--budget``.

``--rehearse`` runs the same steps and writes the same fields on a machine without a GPU:
no CUDA, ``--size tiny``, llama.cpp configured but not compiled (the installed
llama_cpp serves the Python side), and llama-server taken from ``--server`` or
``LLAMACHAT_LLAMA_SERVER`` (server_compare is skipped, and says so, without one).
``--rehearse --compile`` compiles too (CPU only; minutes on two cores) and installs and
runs what it built, as the device does: the dry run of the whole path.

These modules (``gpu_check``, ``gpu_run``, ``gpu_figures``) import only the standard
library: they run before anything is installed.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from tests.bench.gpu_figures import derive
from tests.bench.gpu_run import Body, Runner, Skip, TimedOut
from tests.bench.workload import SUITE_SCALE

REPO = Path(__file__).resolve().parents[2]
ARCHS = ("gemma3", "lfm2", "llama", "mamba")
BENCH_ARCHS = ("gemma3", "lfm2")
"""The branching benchmark and server_compare: the sliding window and the hybrid, the two
kinds llama-server re-processes (exactness takes all four)."""
REHEARSAL_BENCH_ARCHS = ("gemma3",)
"""The rehearsal checks the kit, not the figures: one model halves its time in the test
suite, and its code paths are the same for the other."""
REHEARSAL_EXACTNESS_ARCHS = BENCH_ARCHS
"""The rehearsal's exactness step: the sliding window and the hybrid, whose routes take
every kind of state there is (cells, windows, recurrent states); the device checks all four."""
REHEARSAL_W1_SCALE = SUITE_SCALE / 2
"""The rehearsal's W1 chat, at this fraction of W1's size (``--w1-scale``): half the suite's
other runs, since the rehearsal checks that every step reports every field; that each route
crosses the made gemma3's window is the new-process W1 test's to check, at ``SUITE_SCALE``."""
WINDOW = {"tiny": 64, "gpu": 1024}
"""gemma3's window, as ``tests.bench.branching`` makes its models (same file, made once)."""
DEVICE_BUDGET, REHEARSAL_BUDGET = 540, 600
"""Seconds for all steps: 9 minutes on the device (the run tool's limit is 10, and a
device session has 15 in all, start-up included)."""
CUDA_ARCHITECTURES = "90"
"""Hopper (H100, H200), the cards lent here: one architecture, so each CUDA unit is
compiled once."""
BUILD_TARGETS = ("llama-server", "ggml-rpc")
"""llama-server pulls in libllama and ggml with its CPU and CUDA backends; the RPC backend,
which llamachat uses for ``--rpc``, is named so that it is built whatever the server links."""

REHEARSAL_BUILD_LIMIT = 3600
"""``--rehearse --compile``: a CPU build of the same targets is about 500 CPU seconds of
compiling, some 4 minutes on two idle cores and 18 on busy ones."""

MAKE_MODEL = (
    "import json, sys, time\n"
    "from sessions.synth import make_model\n"
    "t0 = time.perf_counter()\n"
    "path = make_model(sys.argv[1], sys.argv[2], swa_window=int(sys.argv[3]))\n"
    "print(json.dumps({'path': str(path), 'seconds': round(time.perf_counter() - t0, 2)}))\n"
)
"""One model made (or found in the cache), timed by its own process."""

CMAKE_FLAGS = [
    "-G", "Ninja", "-DCMAKE_BUILD_TYPE=Release", "-DBUILD_SHARED_LIBS=ON",
    "-DLLAMA_BUILD_TESTS=OFF", "-DLLAMA_BUILD_EXAMPLES=OFF", "-DLLAMA_BUILD_APP=OFF",
    "-DLLAMA_BUILD_TOOLS=ON", "-DLLAMA_BUILD_SERVER=ON",
    # No network there: no web UI download, no npm; and no TLS, which llama-server needs not.
    "-DLLAMA_USE_PREBUILT_UI=OFF", "-DLLAMA_BUILD_UI=OFF", "-DLLAMA_OPENSSL=OFF",
    "-DGGML_RPC=ON",
]
CUDA_FLAGS = ["-DGGML_CUDA=ON", f"-DCMAKE_CUDA_ARCHITECTURES={CUDA_ARCHITECTURES}"]
DEVICE_PLATFORMS = ["manylinux_2_28_x86_64", "manylinux_2_27_x86_64", "manylinux_2_17_x86_64",
                    "manylinux2014_x86_64", "manylinux1_x86_64"]

# Per step: (time limit in seconds, the steps it needs). The budget cuts any of them short.
STEPS: dict[str, tuple[int, tuple[str, ...]]] = {
    "environment": (30, ()),
    "unpack": (90, ("environment",)),
    "configure": (120, ("unpack",)),
    "build": (420, ("configure",)),
    "install": (60, ("build",)),
    "models": (180, ("unpack",)),
    "exactness": (180, ("install", "models")),
    "server_compare": (240, ("install", "models", "build")),
    "branching": (300, ("install", "models")),
    "batched_versions": (120, ("install", "models")),
}


def system_libstdcxx() -> str | None:
    """The system's libstdc++: the device's compiler links its own into the libraries it
    builds, and llama.cpp's vocabulary loader then crashes in std::regex unless the
    system's is loaded first."""
    for candidate in ("/usr/lib/x86_64-linux-gnu/libstdc++.so.6", "/lib/x86_64-linux-gnu/libstdc++.so.6",
                      "/usr/lib64/libstdc++.so.6"):
        if Path(candidate).is_file():
            return candidate
    try:
        listing = subprocess.run(["ldconfig", "-p"], capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    found = re.search(r"libstdc\+\+\.so\.6 \(libc6,x86-64\) => (\S+)", listing)
    return found.group(1) if found else None


def output_line(command: list[str], last: bool = False) -> str | None:
    """The first (or last) line a tool prints; None when it is missing or fails."""
    try:
        run = subprocess.run(command, capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.SubprocessError):
        return None
    lines = [line.strip() for line in (run.stdout + run.stderr).splitlines() if line.strip()]
    return (lines[-1] if last else lines[0]) if run.returncode == 0 and lines else None


class Check:
    """The steps of the check, in order; ``Runner`` times them, and keeps the report."""

    def __init__(self, args: argparse.Namespace):
        self.args = args
        self.rehearse: bool = args.rehearse
        self.compile: bool = not args.rehearse or args.compile
        self.size = "tiny" if self.rehearse else "gpu"
        self.w1_scale = ["--w1-scale", str(REHEARSAL_W1_SCALE)] if self.rehearse else []
        self.bench_archs: tuple[str, ...] = tuple(args.bench_archs or (
            REHEARSAL_BENCH_ARCHS if self.rehearse else BENCH_ARCHS))
        self.work: Path = args.work
        self.pack: Path = args.pack
        self.work.mkdir(parents=True, exist_ok=True)
        self.site = self.work / "site"
        self.build = self.work / "build"
        self.src: Path | None = None
        self.server: Path | None = None
        self.makers: dict[str, subprocess.Popen] = {}
        report: dict = {
            "schema": 1,
            "mode": "rehearse" if self.rehearse else "device",
            "model_size": self.size,
            "steps": {name: {"status": "pending", "timeout_seconds": cap} for name, (cap, _) in STEPS.items()},
        }
        self.runner = Runner(args.out, report, args.budget, derive)
        self.steps: dict = report["steps"]

    def run(self, command: list[str], timeout: float, env: dict[str, str] | None = None,
            on_line: Callable[[str], None] | None = None) -> list[str]:
        return self.runner.run(command, timeout, cwd=REPO, env=env, on_line=on_line)

    def env(self) -> dict[str, str]:
        """What every Python step runs with: the carried packages and the repo on the path,
        the system libstdc++ first, and llamachat's folders inside the work folder."""
        env = dict(os.environ)
        paths = ([str(self.site)] if self.compile else []) + [str(REPO)]
        env["PYTHONPATH"] = os.pathsep.join(paths + [p for p in [env.get("PYTHONPATH")] if p])
        env["PYTHONUNBUFFERED"] = "1"
        preload = self.steps["environment"].get("libstdcxx_preloaded")
        if preload:
            env["LD_PRELOAD"] = " ".join(p for p in (preload, env.get("LD_PRELOAD")) if p)
        env.setdefault("LLAMACHAT_MODEL_CACHE", str(self.work / "models"))
        for name, folder in (("LLAMACHAT_CONFIG", "config/config.toml"), ("LLAMACHAT_DATA_DIR", "data"),
                             ("LLAMACHAT_CACHE_DIR", "cache")):
            env[name] = str(self.work / "home" / folder)
        return env

    # -- the steps ----------------------------------------------------------------------

    def environment(self, entry: dict, timeout: float) -> None:
        gpu = output_line(["nvidia-smi", "--query-gpu=name,memory.total,driver_version", "--format=csv,noheader"])
        entry.update(
            python=sys.version.split()[0], python_executable=sys.executable, cpus=os.cpu_count(),
            kernel=os.uname().release, gpu=gpu or "none (no nvidia-smi, or it found no GPU)",
            nvcc=output_line(["nvcc", "--version"], last=True) or "none",
            cmake=output_line(["cmake", "--version"]), ninja=output_line(["ninja", "--version"]),
            libstdcxx_preloaded=system_libstdcxx(),
        )
        if not (self.pack / "pack.json").is_file():
            raise RuntimeError(f"no pack at {self.pack}: make it with tests/bench/gpu_pack.sh")
        pack = json.loads((self.pack / "pack.json").read_text())
        entry["pack"] = {**pack, "bytes": sum(p.stat().st_size for p in self.pack.rglob("*") if p.is_file())}
        lacking = [tool for tool in ("cmake", "ninja") if not entry[tool]]
        if not self.rehearse:
            lacking += ["nvcc"] if entry["nvcc"] == "none" else []
            if not gpu:
                lacking.append("a GPU (nvidia-smi)")
        if lacking:
            raise RuntimeError("missing: " + ", ".join(lacking))

    def unpack(self, entry: dict, timeout: float) -> None:
        end = time.monotonic() + timeout
        pack = self.steps["environment"]["pack"]
        target = self.work / "src"
        shutil.rmtree(target, ignore_errors=True)
        target.mkdir(parents=True)
        self.run(["tar", "xzf", str(self.pack / pack["source"]), "-C", str(target)], timeout)
        self.src = target / pack["source_top"]
        wheels = sorted(str(p) for p in (self.pack / "wheels").glob("*.whl"))
        install = [sys.executable, "-m", "pip", "install", "-q", "--no-index", "--no-deps", "--no-compile",
                   "--no-cache-dir", "--upgrade", "--disable-pip-version-check"]
        if self.rehearse:
            # Installed for the device's Python (3.12, manylinux), proving the set complete
            # there; this machine's Python runs the steps with what it has.
            site = self.work / "site-py312"
            install += ["--only-binary=:all:", "--python-version", "3.12", "--implementation", "cp"]
            for platform in DEVICE_PLATFORMS:
                install += ["--platform", platform]
        else:
            site = self.site
        shutil.rmtree(site, ignore_errors=True)
        self.run([*install, "--target", str(site), *wheels], max(1.0, end - time.monotonic()))
        self.start_models()
        entry.update(source=str(self.src), source_files=sum(1 for p in self.src.rglob("*") if p.is_file()),
                     wheels_installed=[Path(w).name for w in wheels], site=str(site),
                     installed_for="python 3.12 manylinux x86_64 (not imported here)" if self.rehearse
                     else f"python {sys.version.split()[0]}")

    def configure(self, entry: dict, timeout: float) -> None:
        assert self.src is not None
        flags = CMAKE_FLAGS + ([] if self.rehearse else CUDA_FLAGS)
        shutil.rmtree(self.build, ignore_errors=True)
        self.run(["cmake", "-S", str(self.src / "vendor" / "llama.cpp"), "-B", str(self.build), *flags], timeout)
        plan = self.run(["ninja", "-C", str(self.build), "-n", *BUILD_TARGETS], 60)
        units: dict[str, int] = {}
        for line in plan:
            found = re.search(r"Building (\w+) object", line)
            if found:
                units[found.group(1)] = units.get(found.group(1), 0) + 1
        entry.update(cmake_flags=flags, compile_units=units, link_steps=sum("Linking" in line for line in plan),
                     targets=list(BUILD_TARGETS))

    def build_step(self, entry: dict, timeout: float) -> None:
        jobs = self.args.jobs
        entry["jobs"] = jobs
        if not self.compile:
            server = self.args.server
            entry["replaced_by"] = "the installed llama_cpp, and llama-server from --server or LLAMACHAT_LLAMA_SERVER"
            if server is not None:
                self.server = server.resolve()
                entry["server"] = str(self.server)
            units = sum(self.steps["configure"]["compile_units"].values())
            raise Skip(f"rehearsal: configured only (its {units} units are about 500 CPU seconds of compiling "
                       "without CUDA; --compile builds them)")
        self.run(["cmake", "--build", str(self.build), "--target", *BUILD_TARGETS, "-j", str(jobs)], timeout)
        libs = self.build / "bin"
        self.server = libs / "llama-server"
        built = {p.name: p.stat().st_size for p in libs.glob("lib*.so*") if p.is_file() and not p.is_symlink()}
        entry.update(server=str(self.server), libraries=built)
        if not self.rehearse and not any(name.startswith("libggml-cuda") for name in built):
            raise RuntimeError("the build made no libggml-cuda")

    def install(self, entry: dict, timeout: float) -> None:
        if self.compile:
            # llama-cpp-python's Python code over the libraries just built. Its lib folder
            # points at the build's own (LLAMA_CPP_LIB_PATH would move libllama's lookup
            # only: llama_cpp._ggml loads from lib whatever it says), so each library is
            # loaded once and ggml's registry is the one llama.cpp uses.
            assert self.src is not None
            package = self.site / "llama_cpp"
            shutil.rmtree(package, ignore_errors=True)
            shutil.copytree(self.src / "llama_cpp", package)
            shutil.rmtree(package / "lib", ignore_errors=True)
            (package / "lib").symlink_to(self.build / "bin", target_is_directory=True)
        probe = (
            "import json, llama_cpp, textual, gguf, isal, platformdirs, tomli_w, diskcache\n"
            "from sessions.llama.devices import devices\n"
            "print(json.dumps({'llama_cpp': llama_cpp.__version__, 'llama_cpp_from': llama_cpp.__file__,\n"
            "  'textual': textual.__version__, 'system_info': llama_cpp.llama_print_system_info().decode().strip(),\n"
            "  'devices': [dict(name=d.name, kind=d.kind, description=d.description, free_bytes=d.free_bytes,\n"
            "                   total_bytes=d.total_bytes) for d in devices()]}))\n"
        )
        found = json.loads(self.run([sys.executable, "-c", probe], timeout, env=self.env())[-1])
        entry.update(found)
        if not self.rehearse and not any(d["kind"] == "GPU" for d in found["devices"]):
            raise RuntimeError("llama.cpp found no GPU: " + ", ".join(d["name"] for d in found["devices"]))

    def start_models(self) -> None:
        """The four models, one process each, started as soon as the wheels are in: they
        need numpy and gguf only, and at the lowest priority they take the cores that the
        compile leaves idle (its link steps, its last long units)."""
        env = self.env()
        for arch in ARCHS:
            command = ["nice", "-n", "19", sys.executable, "-c", MAKE_MODEL, arch, self.size, str(WINDOW[self.size])]
            self.runner.say("$ " + " ".join(command[:4]) + " (make_model) " + " ".join(command[6:]))
            self.makers[arch] = subprocess.Popen(command, cwd=REPO, env=env, stdout=subprocess.PIPE,
                                                 stderr=self.runner.log, text=True, process_group=0)

    def models(self, entry: dict, timeout: float) -> None:
        if not self.makers:
            self.start_models()
        end = time.monotonic() + timeout
        entry["models"] = {}
        failures = []
        for arch, process in self.makers.items():
            try:
                out, _ = process.communicate(timeout=max(0.0, end - time.monotonic()))
            except subprocess.TimeoutExpired:
                self.stop_models()
                raise TimedOut(f"models not made after {timeout:.0f} s") from None
            if process.returncode != 0:
                failures.append(arch)
                continue
            made = json.loads(out.strip().splitlines()[-1])
            path = Path(made["path"])
            entry["models"][arch] = {"path": str(path), "bytes": path.stat().st_size, "seconds": made["seconds"]}
            self.runner.write()
        if failures:
            raise RuntimeError("could not make: " + ", ".join(failures))

    def stop_models(self) -> None:
        for process in self.makers.values():
            if process.poll() is None:
                self.runner.kill(process)

    def bench(self, module: str, extra: list[str], archs: tuple[str, ...]) -> Callable[[dict, float], None]:
        def body(entry: dict, timeout: float) -> None:
            command = [sys.executable, "-m", module, "--size", self.size, "--ngl", "all",
                       "--threads", str(self.args.threads), "--arch", *archs, *extra]
            entry["command"] = " ".join(command)
            self.run(command, timeout, env=self.env(), on_line=self.runner.records_into(entry))

        return body

    def server_compare(self, entry: dict, timeout: float) -> None:
        if self.server is None:
            raise Skip("no llama-server: the rehearsal builds none; pass --server or LLAMACHAT_LLAMA_SERVER")
        entry["server"] = str(self.server)
        self.bench("tests.bench.server_compare", ["--server", str(self.server), *self.w1_scale],
                   self.bench_archs)(entry, timeout)

    # -- all of it ----------------------------------------------------------------------

    def main(self) -> int:
        bodies: dict[str, Body] = {
            "environment": self.environment,
            "unpack": self.unpack,
            "configure": self.configure,
            "build": self.build_step,
            "install": self.install,
            "models": self.models,
            "exactness": self.bench("tests.bench.gpu_exactness", [],
                                    REHEARSAL_EXACTNESS_ARCHS if self.rehearse else ARCHS),
            "server_compare": self.server_compare,
            # A rehearsal times two reopens, not five: their median is not what it checks.
            "branching": self.bench("tests.bench.branching",
                                    ["--reopens", "2", *self.w1_scale] if self.rehearse else [], self.bench_archs),
            # Last: several versions in one batch, where a batch of 4 should cost about one.
            "batched_versions": self.bench("tests.bench.batched_versions",
                                           ["--tokens", "16"] if self.rehearse else [], self.bench_archs),
        }
        self.runner.say(f"{self.runner.report['mode']}: pack {self.pack}, work {self.work}, "
                        f"figures {self.runner.json_path}")
        for name, body in bodies.items():
            cap, needs = STEPS[name]
            if name == "build" and self.rehearse:
                cap = REHEARSAL_BUILD_LIMIT
            self.runner.step(name, cap, needs, body)
        self.stop_models()
        self.runner.close()
        failed = [n for n, s in self.steps.items() if s["status"] in ("failed", "timed_out")]
        print(json.dumps({"gpu_check": str(self.runner.json_path), "failed": failed,
                          "statuses": {n: s["status"] for n, s in self.steps.items()}}), flush=True)
        return 1 if failed else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.bench.gpu_check", description=__doc__.splitlines()[0])
    parser.add_argument("--rehearse", action="store_true",
                        help="this machine, no GPU: no CUDA, tiny models, llama.cpp configured but not compiled")
    parser.add_argument("--pack", type=Path, default=REPO / ".gpupack", help="made by tests/bench/gpu_pack.sh")
    parser.add_argument("--out", type=Path, default=None, help="figures and log (default $OUT, else .gpucheck/out)")
    parser.add_argument("--work", type=Path, default=None,
                        help="sources, build, models (default /tmp/llamachat-gpu-check; rehearsal .gpucheck/work)")
    parser.add_argument("--budget", type=float, default=None,
                        help=f"seconds for all steps (default {DEVICE_BUDGET}; rehearsal {REHEARSAL_BUDGET})")
    parser.add_argument("--compile", action="store_true",
                        help="rehearsal: compile llama.cpp (CPU only) and run what it built, as the device does")
    parser.add_argument("--bench-archs", nargs="+", choices=ARCHS, default=None,
                        help=f"models of branching and server_compare (default {' '.join(BENCH_ARCHS)}; "
                             f"rehearsal {' '.join(REHEARSAL_BENCH_ARCHS)})")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 2, help="compile jobs")
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 2, help="the benchmarks' CPU threads")
    parser.add_argument("--server", type=Path, default=None,
                        help="rehearsal: a llama-server to compare with (default $LLAMACHAT_LLAMA_SERVER)")
    args = parser.parse_args(argv)
    if args.out is None:
        args.out = Path(os.environ["OUT"]) if os.environ.get("OUT") else REPO / ".gpucheck" / "out"
    if args.work is None:
        args.work = REPO / ".gpucheck" / "work" if args.rehearse else Path("/tmp/llamachat-gpu-check")
    if args.budget is None:
        args.budget = REHEARSAL_BUDGET if args.rehearse else DEVICE_BUDGET
    if args.server is None and os.environ.get("LLAMACHAT_LLAMA_SERVER"):
        args.server = Path(os.environ["LLAMACHAT_LLAMA_SERVER"])
    if args.server is not None and not os.access(args.server, os.X_OK):
        parser.error(f"{args.server} is not an executable llama-server")
    check = Check(args)

    def stop(signum, _frame):
        check.stop_models()
        check.runner.stop(signum)
        sys.exit(128 + signum)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    return check.main()


if __name__ == "__main__":
    sys.exit(main())
