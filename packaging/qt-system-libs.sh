#!/usr/bin/env sh
# Install the system libraries Qt (PySide6) needs to open windows on X11 (the xcb
# platform) on Debian and Ubuntu; packages already installed are left alone.
# Usage: packaging/qt-system-libs.sh [--xvfb]   (--xvfb adds the virtual X server CI uses)
set -eu
pkgs="libegl1 libgl1 libfontconfig1 libdbus-1-3 libglib2.0-0 libxkbcommon0 libxkbcommon-x11-0
libx11-xcb1 libxcb-cursor0 libxcb-icccm4 libxcb-keysyms1 libxcb-image0 libxcb-randr0
libxcb-render-util0 libxcb-shape0 libxcb-shm0 libxcb-sync1 libxcb-xfixes0 libxcb-xinerama0
libxcb-xkb1 fonts-dejavu-core python3-venv"
if [ "${1:-}" = "--xvfb" ]; then pkgs="$pkgs xvfb xauth"; fi
if ! command -v dpkg >/dev/null 2>&1; then
  echo "qt-system-libs: not a Debian/Ubuntu system; install Qt 6's xcb libraries with your" \
       "package manager (see packaging/README.md)." >&2
  exit 0
fi
need=""
for p in $pkgs; do
  dpkg -s "$p" >/dev/null 2>&1 || need="$need $p"
done
[ -z "$need" ] && exit 0
sudo=""
[ "$(id -u)" -ne 0 ] && sudo="sudo"
echo "qt-system-libs: installing$need"
$sudo apt-get update -qq
$sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $need
