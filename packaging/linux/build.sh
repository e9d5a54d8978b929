#!/bin/sh
# Build kubetray for Linux: the PyInstaller bundle, a .deb and a .tar.gz (with install.sh).
#   packaging/linux/build.sh [PYTHON]      (default: .venv/bin/python)
# Output in build/dist/: kubetray_<version>_<arch>.deb, kubetray-<version>-linux-<arch>.tar.gz
# The version is git's (packaging/build.py). The bundle needs the glibc it was built against or
# newer: build on the oldest distribution you support (the CI workflow uses Ubuntu 22.04).
set -eu
root=$(cd "$(dirname "$0")/../.." && pwd)
python=${1:-$root/.venv/bin/python}
cd "$root"
"$python" packaging/build.py
packaging/linux/pack.sh build/dist/kubetray build/dist "$python"
