#!/usr/bin/env bash
# Make the pack that the GPU check (python3 -m tests.bench.gpu_check) needs on a device
# machine, which has no network: a trimmed llama.cpp source and the wheels it lacks.
#
#   bash tests/bench/gpu_pack.sh [PACK_DIR]   # default .gpupack (git ignores it); relative to the repo root
#
# Run it where PyPI answers. The pack travels with the working tree, which may hold
# 64 MiB in all, so the source goes as one compressed tarball and the script fails when
# pack plus repo are over that.
set -euo pipefail
cd "$(dirname "$0")/../.."
pack=${1:-.gpupack}
python=${PYTHON:-python3}
llama_pin=$(grep -o 'llama-cpp-python==[0-9.]*' pyproject.toml)
version=${llama_pin#*==}
limit=$((64 << 20))

# Pure-Python wheels (and isal's binary one) that the device image lacks, or holds at a
# version textual 8.2.8 may not take. numpy, jinja2, markupsafe, pyyaml, requests and
# tqdm are in the device image's package list: two copies of one package stop an
# install, so those stay out. Versions are the ones the test suite runs with.
wheels=(
    textual==8.2.8 rich==15.0.0 markdown-it-py==4.3.0 mdit-py-plugins==0.7.0 linkify-it-py==2.2.0
    mdurl==0.1.2 pygments==2.21.0 platformdirs==4.14.8 typing-extensions==4.16.0
    tomli-w==1.2.0 gguf==0.19.0 diskcache==5.6.3 isal==1.9.1
)
# What the device has already, for the closure check below (names as pip normalises them).
device_has="numpy jinja2 markupsafe pyyaml requests tqdm certifi idna urllib3 charset-normalizer"

cache=${LLAMACHAT_PACK_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/llamachat-gpupack}
mkdir -p "$cache"
sdist="$cache/llama_cpp_python-$version.tar.gz"
if [ ! -f "$sdist" ]; then
    "$python" -m pip download --quiet --no-deps --no-binary :all: "$llama_pin" -d "$cache"
fi

rm -rf "$pack"
mkdir -p "$pack/wheels"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
tar xzf "$sdist" -C "$work"
top="llama_cpp_python-$version"
src="$work/$top"
v="$src/vendor/llama.cpp"

# What building libllama, ggml (CPU, CUDA, RPC), llama-server and the Python bindings
# never reads. Tests, examples and benches stay out of the build by its CMake flags.
rm -rf "$src"/{.git,.github,docs,examples,tests,docker,scripts,mkdocs.yml}
rm -rf "$v"/{models,docs,benches,tests,examples,pocs,media,gguf-py,conversion,ci,skills,requirements,grammars}
rm -rf "$v"/{.git,.github,.devops,.gemini,.pi,app} "$v"/convert_*.py "$v"/build-xcframework.sh
find "$v/scripts" -mindepth 1 -not -name '*.cmake' -exec rm -rf {} +
for backend in blas cann et hexagon hip metal musa opencl openvino sycl virtgpu vulkan webgpu zdnn zendnn; do
    rm -rf "$v/ggml/src/ggml-$backend"
done
# The web UI: with LLAMA_USE_PREBUILT_UI and LLAMA_BUILD_UI off, llama-server embeds none,
# and CMake reads only these four files of it.
find "$v/tools/ui" -mindepth 1 -maxdepth 1 \
    -not -name CMakeLists.txt -not -name sources.cmake -not -name ui.cpp.in -not -name ui.h.in -exec rm -rf {} +
rm -rf "$v"/tools/server/{tests,bench,README*.md} "$v"/tools/mtmd/{tests,test-*} "$v"/tools/*/README.md
tar czf "$pack/llama-src.tar.gz" -C "$work" "$top"

# Downloaded once per list: later packs (the rehearsal test's) need no network.
wheel_cache="$cache/wheels-$(echo "${wheels[*]}" | sha256sum | cut -c1-12)"
if [ ! -f "$wheel_cache/.complete" ]; then
    rm -rf "$wheel_cache"
    "$python" -m pip download --quiet --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
        --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64 \
        --platform manylinux2014_x86_64 --platform manylinux1_x86_64 -d "$wheel_cache" "${wheels[@]}"
    touch "$wheel_cache/.complete"
fi
cp "$wheel_cache"/*.whl "$pack/wheels/"

# Every requirement of a carried wheel is carried or on the device (extras aside).
"$python" - "$pack/wheels" "$device_has" <<'PY'
import re, sys, zipfile
from pathlib import Path

def norm(name):
    return re.sub(r"[-_.]+", "-", name).lower()

folder, have = Path(sys.argv[1]), set(sys.argv[2].split())
carried, needed = set(), {}
for wheel in sorted(folder.glob("*.whl")):
    with zipfile.ZipFile(wheel) as zf:
        meta = next(n for n in zf.namelist() if n.endswith(".dist-info/METADATA"))
        text = zf.read(meta).decode()
    carried.add(norm(re.search(r"^Name: (.+)$", text, re.M).group(1).strip()))
    for line in re.findall(r"^Requires-Dist: (.+)$", text, re.M):
        if "extra ==" in line:
            continue
        needed.setdefault(norm(re.match(r"[A-Za-z0-9_.-]+", line).group(0)), wheel.name)
missing = {name: by for name, by in needed.items() if name not in carried | have}
if missing:
    sys.exit("gpu_pack: needed by the wheels but neither carried nor on the device: "
             + ", ".join(f"{n} ({by})" for n, by in sorted(missing.items())))
PY

cat > "$pack/pack.json" <<EOF
{"llama_cpp_python": "$version", "source": "llama-src.tar.gz", "source_top": "$top",
 "wheels": [$(cd "$pack/wheels" && ls *.whl | sed 's/.*/"&"/' | paste -sd, -)],
 "made": "$(date -u +%Y-%m-%dT%H:%M:%SZ)"}
EOF

# What travels: tracked files, untracked ones git does not ignore, and the pack.
tree_bytes=$(git ls-files -z --cached --others --exclude-standard | xargs -0 stat -c %s 2>/dev/null \
    | awk '{s += $1} END {print s + 0}')
pack_bytes=$(du -sb "$pack" | cut -f1)
total=$((tree_bytes + pack_bytes))
mib() { awk -v b="$1" 'BEGIN {printf "%.1f", b / 1048576}'; }
echo "gpu_pack: $pack: source $(du -h "$pack/llama-src.tar.gz" | cut -f1), $(ls "$pack/wheels" | wc -l) wheels;" \
    "pack $(mib "$pack_bytes") MiB + working tree $(mib "$tree_bytes") MiB = $(mib "$total") MiB of 64"
if [ "$total" -gt "$limit" ]; then
    echo "gpu_pack: over the 64 MiB a device call carries" >&2
    exit 1
fi
