#!/usr/bin/env bash
# Smoke-test a frozen Canopy app folder headless: --version, `canopy solve` and
# `canopy verify` on a bundled sample, and `canopy gui --screenshot` when the app has the
# gui verb. Usage: packaging/smoke_app.sh [dist/canopy]
set -euo pipefail
[ -d "${1:-dist/canopy}" ] || { echo "smoke: no app folder ${1:-dist/canopy}; build it with packaging/build_app.sh." >&2; exit 1; }
APP=$(cd "${1:-dist/canopy}" && pwd)
EXE="$APP/canopy"
export QT_QPA_PLATFORM=offscreen
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

fail() { echo "smoke: $*" >&2; exit 1; }

[ -x "$EXE" ] || fail "no executable at $EXE."
"$EXE" --version | tee "$tmp/version.txt"
grep -q "^canopy [0-9]" "$tmp/version.txt" || fail "--version did not report Canopy's version."
if grep -q "not installed" "$tmp/version.txt"; then
  fail "--version misses library metadata in the bundle."
fi

sample=$(find "$APP" -path "*/samples/dgx-a100-2x8.json" -print -quit)
[ -n "$sample" ] || fail "the bundled sample samples/dgx-a100-2x8.json is missing from $APP."
for icon in canopy.svg canopy.png; do
  [ -n "$(find "$APP" -path "*/resources/$icon" -print -quit)" ] || fail "resources/$icon is missing."
done
[ -n "$(find "$APP" -name 'libqoffscreen.so' -print -quit)" ] || fail "Qt platform plugins are missing."

# Run from an empty directory so nothing can come from a source tree.
(cd "$tmp" && "$EXE" solve "$sample" --json schedule.json) | tee "$tmp/solve.txt"
grep -q "optimal algbw" "$tmp/solve.txt" || fail "canopy solve printed no optimum."
"$EXE" verify "$sample" "$tmp/schedule.json"

"$EXE" --help > "$tmp/help.txt"
if grep -qw gui "$tmp/help.txt"; then
  "$EXE" gui --screenshot "$tmp/gui.png"
  [ "$(head -c 8 "$tmp/gui.png" | od -An -tx1 | tr -d ' \n')" = "89504e470d0a1a0a" ] \
    || fail "canopy gui --screenshot wrote no PNG."
  echo "smoke: gui screenshot $(stat -c %s "$tmp/gui.png") bytes"
else
  echo "smoke: this build has no gui verb yet; skipped canopy gui --screenshot."
fi
echo "smoke: frozen app OK"
