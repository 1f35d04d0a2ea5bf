#!/usr/bin/env bash
# deb_extract.sh: tests launcher/scripts/deb_extract.py (gpu-run.sh's unpacker) on packages built here
# with dpkg-deb: files and modes land under the prefix as dpkg -x puts them, absolute symlinks are
# rewritten to relative ones inside the prefix, relative ones kept, nothing is written outside it; a
# file that is not a .deb, and a data archive Python cannot read (zstd), give exit status 2 and one
# line. Skips (exit 77) without dpkg-deb.
#
#   deb_extract.sh SOURCE_DIR
set -uo pipefail
SOURCE_DIR="$(realpath "$1")"
EXTRACT="$SOURCE_DIR/launcher/scripts/deb_extract.py"
command -v dpkg-deb >/dev/null || { echo "dpkg-deb not found: skipped"; exit 77; }
WORK="$(mktemp -d "${TMPDIR:-/tmp}/itertime-deb.XXXXXX")"
trap 'rm -rf "$WORK"' EXIT
failures=0
fail() { echo "FAIL: $*" >&2; failures=$((failures + 1)); }

# A package: a library, its absolute and relative links, a script, a folder.
pkg="$WORK/pkg"
mkdir -p "$pkg/DEBIAN" "$pkg/usr/lib/x86_64-linux-gnu" "$pkg/usr/bin" "$pkg/usr/share/empty"
printf 'Package: itertime-test\nVersion: 1.0\nArchitecture: all\nMaintainer: itertime\nDescription: test\n' >"$pkg/DEBIAN/control"
echo "library" >"$pkg/usr/lib/x86_64-linux-gnu/libx.so.1.2"
ln -s /usr/lib/x86_64-linux-gnu/libx.so.1.2 "$pkg/usr/lib/x86_64-linux-gnu/libx.so"
ln -s libx.so.1.2 "$pkg/usr/lib/x86_64-linux-gnu/libx.so.1"
printf '#!/bin/sh\necho hi\n' >"$pkg/usr/bin/tool"
chmod 755 "$pkg/usr/bin/tool"
dpkg-deb -Zxz --root-owner-group --build "$pkg" "$WORK/x.deb" >/dev/null || fail "dpkg-deb could not build the xz package"

prefix="$WORK/prefix with space"
python3 "$EXTRACT" "$prefix" "$WORK/x.deb" || fail "deb_extract.py failed on an xz package"
lib="$prefix/usr/lib/x86_64-linux-gnu"
[[ "$(cat "$lib/libx.so.1.2")" == library ]] || fail "the library's contents are wrong"
[[ "$(readlink "$lib/libx.so")" == libx.so.1.2 ]] || fail "the absolute link was not made relative: $(readlink "$lib/libx.so")"
[[ "$(readlink "$lib/libx.so.1")" == libx.so.1.2 ]] || fail "the relative link changed: $(readlink "$lib/libx.so.1")"
[[ "$(cat "$lib/libx.so")" == library ]] || fail "the rewritten link does not reach the library"
[[ -x "$prefix/usr/bin/tool" && "$("$prefix/usr/bin/tool")" == hi ]] || fail "the script lost its mode"
[[ -d "$prefix/usr/share/empty" ]] || fail "the empty folder is missing"
[[ ! -e "$prefix/DEBIAN" ]] || fail "the control files were unpacked"
# Unpacking again over the same prefix replaces what is there.
python3 "$EXTRACT" "$prefix" "$WORK/x.deb" || fail "a second unpack over the prefix failed"

# Refusals: one line, status 2.
echo "not a package" >"$WORK/plain.deb"
python3 "$EXTRACT" "$WORK/p2" "$WORK/plain.deb" 2>"$WORK/err"
status=$?
[[ $status -eq 2 ]] || fail "a plain file: status $status, expected 2"
[[ "$(wc -l <"$WORK/err")" -eq 1 ]] && grep -q "^deb_extract: error: .*not a .deb" "$WORK/err" || fail "a plain file: $(cat "$WORK/err")"
# (Python 3.14's tarfile reads zstd: there such a package unpacks.)
if ! python3 -c 'import compression.zstd' 2>/dev/null &&
  dpkg-deb -Zzstd --root-owner-group --build "$pkg" "$WORK/z.deb" >/dev/null 2>&1; then
  python3 "$EXTRACT" "$WORK/p3" "$WORK/z.deb" 2>"$WORK/err"
  status=$?
  [[ $status -eq 2 ]] || fail "a zstd package: status $status, expected 2"
  [[ "$(wc -l <"$WORK/err")" -eq 1 ]] && grep -q "cannot read data.tar.zst" "$WORK/err" || fail "a zstd package: $(cat "$WORK/err")"
fi

if [[ $failures -ne 0 ]]; then
  echo "$failures check(s) failed" >&2
  exit 1
fi
echo "ok deb_extract"
