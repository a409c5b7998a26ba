#!/usr/bin/env bash
# On a GPU machine without network: installs PyCUDA (built from its sdist against the
# machine's CUDA toolkit and driver) and the few packages netbrew needs that the machine
# lacks, all from the files tools/fetch_gpu_deps.sh put in .gpu/. One command:
#
#   source tools/gpu_env.sh        (sets PYTHONPATH to the install folder)
#
# Then `python3 -m pytest -m cuda tests/cuda` and `python3 benchmarks/cuda.py` run there.
set -eo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
wheels="$here/.gpu"
site="${NETBREW_GPU_SITE:-/tmp/netbrew-gpu-site}"
if [ ! -d "$wheels" ]; then
  echo "gpu_env: $wheels is missing: run tools/fetch_gpu_deps.sh where there is network" >&2
  return 1 2>/dev/null || exit 1
fi
nvcc_path="$(command -v nvcc || true)"
if [ -z "$nvcc_path" ]; then
  echo "gpu_env: nvcc not found: PyCUDA builds against the CUDA toolkit" >&2
  return 1 2>/dev/null || exit 1
fi
if [ -z "${CUDA_ROOT:-}" ]; then
  if [ -f /usr/local/cuda/include/cuda.h ]; then
    CUDA_ROOT=/usr/local/cuda
  else
    CUDA_ROOT="$(dirname "$(dirname "$(readlink -f "$nvcc_path")")")"
  fi
fi
export CUDA_ROOT
export PATH="$CUDA_ROOT/bin:$PATH"
mkdir -p "$site"
# the pure-Python and binary dependencies first, then PyCUDA from source against them
python3 -m pip install --quiet --no-index --no-deps --no-compile --target "$site" \
  "$wheels"/*.whl
export PYTHONPATH="$site:$here${PYTHONPATH:+:$PYTHONPATH}"
# a pycuda wheel built on an earlier run (NETBREW_GPU_WHEELS_OUT keeps it) saves the build
pycuda_wheel="$(ls "$wheels"/pycuda-*.whl 2>/dev/null | head -1)"
if [ -z "$pycuda_wheel" ]; then
  built="${NETBREW_GPU_WHEELS_OUT:-/tmp/netbrew-gpu-wheels}"
  mkdir -p "$built"
  python3 "$here/tools/build_pycuda.py" "$wheels"/pycuda-*.tar.gz "$built" >/dev/null
  pycuda_wheel="$(ls "$built"/pycuda-*.whl | head -1)"
fi
python3 -m pip install --quiet --no-index --no-deps --no-compile --target "$site" "$pycuda_wheel"
python3 -c "import pycuda.driver as d; d.init(); print('pycuda', d.get_version(), d.Device(0).name())"
