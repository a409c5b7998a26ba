#!/usr/bin/env bash
# Downloads, on a machine with network, what tools/gpu_env.sh installs on a GPU machine
# that has none: PyCUDA's sdist, its pure-Python dependencies, and the binary wheels they
# and netbrew need for that machine's Python (3.12 by default). Into .gpu/ (git-ignored).
#
#   bash tools/fetch_gpu_deps.sh [python-version]
set -euo pipefail
cd "$(dirname "$0")/.."
py="${1:-3.12}"
dest=.gpu
mkdir -p "$dest"
grep -qx '/.gpu/' .git/info/exclude 2>/dev/null || echo '/.gpu/' >> .git/info/exclude
pip_download() {
  python3 -m pip download --quiet --no-deps -d "$dest" "$@"
}
pip_download --no-binary=:all: --no-build-isolation "pycuda>=2022.1"
pip_download pytools platformdirs mako typing-extensions threadpoolctl
for pkg in markupsafe siphash24 "protobuf>=7.35.1"; do
  pip_download --only-binary=:all: --python-version "$py" --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 \
    --platform manylinux2014_x86_64 "$pkg"
done
ls -1 "$dest"
