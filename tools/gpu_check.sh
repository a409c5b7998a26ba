#!/usr/bin/env bash
# Issue 22's checks in one run on a GPU machine without network (what the device tool
# lends): pycuda from .gpu/ (tools/gpu_env.sh), every .cu compiled in parallel into
# PyCUDA's cache, the `cuda` suite, the demo on the GPU and benchmarks/cuda.py, then the
# conv tests and the benchmark again under each trial setting (see the loop at the end).
# Logs and the pycuda wheel built here go to $OUT (default /tmp/netbrew-gpu-out).
#
#   bash tools/gpu_check.sh [pytest args...]
set -o pipefail
cd "$(dirname "$0")/.."
out="${OUT:-/tmp/netbrew-gpu-out}"
mkdir -p "$out"
export PYTHONUNBUFFERED=1 NETBREW_GPU_WHEELS_OUT="$out"
start=$SECONDS
stamp() { echo "== $1 at $((SECONDS - start)) s"; }
nvidia-smi -L
stamp "gpu_env"
source tools/gpu_env.sh > "$out/env.log" 2>&1 || { tail -40 "$out/env.log"; exit 1; }
set +e  # gpu_env.sh sets -e; every step below runs whatever the last one gave
tail -1 "$out/env.log"
stamp "kernels"
timeout 180 python3 - <<'PY' 2>&1 | tee "$out/kernels.log"
from concurrent.futures import ThreadPoolExecutor
import pycuda.autoinit  # noqa: F401
from pycuda.compiler import compile
from netbrew.cuda.compile import KERNEL_DIR, OPTIONS, cu_files

def build(path):
    try:
        compile(path.read_text(), no_extern_c=True, options=list(OPTIONS), arch="sm_90",
                include_dirs=[str(KERNEL_DIR)])
        return f"{path.name}: ok"
    except Exception as e:
        return f"{path.name}: FAILED {e}"

with ThreadPoolExecutor(16) as pool:
    print("\n".join(pool.map(build, cu_files())))
PY
stamp "cuda suite"
plugins=()
python3 -c "import xdist" 2>/dev/null && plugins+=(-n 8)
python3 -c "import pytest_timeout" 2>/dev/null && plugins+=(--timeout 90)
timeout "${NETBREW_GPU_TEST_S:-240}" python3 -m pytest -q -p no:cacheprovider -m cuda tests/cuda \
  "${plugins[@]}" --tb=short -rfE "$@" 2>&1 | tee "$out/pytest.log" | tail -60
stamp "demo"
timeout 90 python3 -c "import sys; from netbrew.cli import main; sys.exit(main(['demo', \
  '--device', 'cuda', '--output', '/tmp/netbrew-demo']))" 2>&1 | tee "$out/demo.log" | tail -8
stamp "benchmark"
timeout "${NETBREW_GPU_BENCH_S:-150}" python3 benchmarks/cuda.py --reps 10 ${NETBREW_GPU_BENCH_ARGS:-} 2>&1 \
  | tee "$out/bench.log" | tail -120
cp benchmarks/CUDA.md "$out/" 2>/dev/null
# Trials that are off by default until a GPU run shows them right and faster; each one's
# tests and benchmark land in $out beside the default run's (CUDA.md stays the default's).
for trial in NETBREW_CUDNN_BENCHMARK=1; do
  stamp "trial $trial"
  env "$trial" timeout 120 python3 -m pytest -q -p no:cacheprovider -m cuda \
    tests/cuda/kernels/test_cuda_conv.py tests/cuda/kernels/test_cuda_zoo.py "${plugins[@]}" \
    --tb=short -rfE 2>&1 | tee "$out/pytest-${trial%%=*}.log" | tail -8
  env "$trial" timeout "${NETBREW_GPU_BENCH_S:-150}" python3 benchmarks/cuda.py \
    --reps 10 ${NETBREW_GPU_BENCH_ARGS:-} 2>&1 | tee "$out/bench-${trial%%=*}.log" | tail -6
  cp "$out/CUDA.md" benchmarks/CUDA.md 2>/dev/null
done
stamp "done"
