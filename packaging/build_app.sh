#!/usr/bin/env bash
# Build the one-folder Canopy application into dist/canopy/ with PyInstaller, print the
# build time and the folder size, then smoke-test it headless (packaging/smoke_app.sh).
# Usage: packaging/build_app.sh            (uses .venv/bin/python; override with PYTHON=...)
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-.venv/bin/python}

if ! "$PY" -c "import PyInstaller" 2>/dev/null; then
  echo "installing PyInstaller into $("$PY" -c 'import sys; print(sys.prefix)')"
  "$PY" -m pip install -q "pyinstaller>=6.10,<7"
fi

start=$(date +%s)
"$PY" -m PyInstaller --noconfirm --clean --log-level WARN \
  --distpath dist --workpath build/pyinstaller packaging/canopy.spec
end=$(date +%s)

echo "build time: $((end - start)) s"
echo "app folder: $(du -sh dist/canopy | cut -f1) (dist/canopy)"
packaging/smoke_app.sh dist/canopy
