#!/usr/bin/env bash
# Runs the README's test command (launcher/scripts/test.sh) inside a Debian 13 (trixie) root on a
# Debian 12 machine, so that both releases are tested from one checkout. As root.
#
#   launcher/scripts/debian13.sh [CTEST_ARGS...]     create/reuse the root, install, build, run every test
#   launcher/scripts/debian13.sh --shell             an interactive shell inside the root (mounts in place)
#   launcher/scripts/debian13.sh -- CMD [ARGS...]    run CMD inside the root (mounts in place), e.g.
#                                                    launcher/scripts/debian13.sh -- apt-cache policy libtorch-dev
#
# Steps:
#  1. debootstrap --variant=minbase trixie into $ITERTIME_DEB13_ROOT (default /var/tmp/itertime-deb13)
#     from the machine's configured Debian mirror (/etc/apt/sources.list{,.d/*.sources}; fallback
#     http://deb.debian.org/debian), with an apt sources.list for trixie, trixie-updates and
#     trixie-security (main contrib non-free non-free-firmware). A complete root (marker file
#     .itertime-root-complete) is reused; an incomplete one is deleted and made again. debootstrap is
#     installed with apt-get when missing.
#  2. Mounts: the checkout read-write at /itertime, proc, /dev (rbind, devpts and /dev/shm included) and
#     /sys (rbind); copies /etc/resolv.conf. Everything mounted is unmounted on any exit (success,
#     failure, Ctrl-C), recursively, with a lazy unmount as fallback.
#  3. Inside the root, in /itertime: launcher/scripts/setup-debian.sh, then
#     ITERTIME_BUILD_DIR=/itertime/build-deb13 launcher/scripts/test.sh CTEST_ARGS..., so the build
#     folder (build-deb13/ in the checkout) never collides with the native build/.
# The time of each step is printed; the exit status is test.sh's (ctest's, or the build's on failure).
#
# Environment: ITERTIME_DEB13_ROOT (the root's folder), ITERTIME_DEBIAN_MIRROR (overrides the mirror),
# ITERTIME_DEB13_FUZZ_INPUTS (the fuzzers' inputs per parser in the root's test run, default 20000),
# ITERTIME_DEB_SUITE (default trixie; bookworm makes a bare Debian 12 root for gpu-bundle-check.sh),
# ITERTIME_BUILD_DIR is NOT read here (the inside build folder is fixed to /itertime/build-deb13; with
# -- CMD, export what CMD needs through env, e.g. -- env ITERTIME_BUILD_DIR=/itertime/x CMD).
# Runs concurrently with other invocations on other roots; one root is locked (flock) while in use.
# Ctrl-C stops the command inside, then unmounts; a SIGTERM to this script alone unmounts once the
# command inside has ended; mounts left by a SIGKILL are removed by the next run on the same root.
set -euo pipefail

CHECKOUT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
DEB13_ROOT="${ITERTIME_DEB13_ROOT:-/var/tmp/itertime-deb13}"
DEB13_ROOT="${DEB13_ROOT%/}"
SUITE="${ITERTIME_DEB_SUITE:-trixie}"
INSIDE=/itertime
MARKER=.itertime-root-complete

log() { echo "debian13: $*"; }
die() { echo "debian13: error: $*" >&2; exit 2; }
now() { date +%s; }
elapsed() { local s=$(( $(now) - $1 )); printf '%dm%02ds' $((s / 60)) $((s % 60)); }

mode="test"
cmd=()
case "${1:-}" in
  --shell) mode=shell; shift; [ $# -eq 0 ] || die "--shell takes no arguments" ;;
  --) mode=cmd; shift; [ $# -gt 0 ] || die "-- needs a command"; cmd=("$@") ;;
  -h|--help) sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
esac

[ "$(id -u)" -eq 0 ] || die "must run as root (debootstrap, chroot and mount)"
case "$DEB13_ROOT" in
  /*) ;;
  *) die "ITERTIME_DEB13_ROOT must be an absolute path (got '$DEB13_ROOT')" ;;
esac
case "$DEB13_ROOT" in
  /|/bin|/boot|/dev|/etc|/home|/lib*|/opt|/proc|/root|/run|/sbin|/srv|/sys|/tmp|/usr|/var|/var/tmp|/work)
    die "refusing ITERTIME_DEB13_ROOT=$DEB13_ROOT" ;;
esac
case "$CHECKOUT/" in
  "$DEB13_ROOT"/*) die "the root ($DEB13_ROOT) must not contain the checkout ($CHECKOUT)" ;;
esac

# ---- the mirror ---------------------------------------------------------------------------------
# The first URI of the machine's main Debian suite (VERSION_CODENAME, not -security/-updates and not
# third-party suites), from one-line sources.list files and deb822 .sources files.
host_mirror() {
  local codename files=()
  # shellcheck disable=SC1091
  codename="$(. /etc/os-release 2>/dev/null && echo "${VERSION_CODENAME:-}")"
  [ -n "$codename" ] || return 0
  [ -f /etc/apt/sources.list ] && files+=(/etc/apt/sources.list)
  for f in /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources; do
    [ -f "$f" ] && files+=("$f")
  done
  [ "${#files[@]}" -gt 0 ] || return 0
  awk -v cn="$codename" '
    function ok(u) { return u ~ /^(https?|ftp|file):/ && u !~ /security/ }
    function flush() {
      if (uris != "" && (" " suites " ") ~ (" " cn " ") && types ~ /(^| )deb( |$)/ && enabled !~ /^(no|false)$/) {
        n = split(uris, a, " "); for (i = 1; i <= n; i++) if (ok(a[i])) { print a[i]; exit }
      }
      uris = ""; suites = ""; types = ""; enabled = ""
    }
    FNR == 1 { flush(); deb822 = (FILENAME ~ /\.sources$/) }
    /^[ \t]*#/ { next }
    !deb822 && $1 == "deb" {
      i = 2; if ($i ~ /^\[/) { while ($i !~ /\]$/) i++; i++ }
      if ($(i + 1) == cn && ok($i)) { print $i; exit }
      next
    }
    deb822 && /^[ \t]*$/ { flush(); next }
    deb822 && tolower($1) == "uris:"    { $1 = ""; uris = $0 }
    deb822 && tolower($1) == "suites:"  { $1 = ""; suites = $0 }
    deb822 && tolower($1) == "types:"   { $1 = ""; types = $0 }
    deb822 && tolower($1) == "enabled:" { enabled = tolower($2) }
    END { flush() }
  ' "${files[@]}" | head -n 1
}
MIRROR="${ITERTIME_DEBIAN_MIRROR:-$(host_mirror)}"
MIRROR="${MIRROR:-http://deb.debian.org/debian}"
MIRROR="${MIRROR%/}"
# The security archive lives beside the mirror on deb.debian.org and its mirrors; elsewhere use
# deb.debian.org's.
case "$MIRROR" in
  */debian) SECURITY="${MIRROR%/debian}/debian-security" ;;
  *) SECURITY=http://deb.debian.org/debian-security ;;
esac

# ---- mounts and their cleanup -------------------------------------------------------------------
MOUNTED=()   # mount points, in mount order; unmounted in reverse
# Every mount point at or under the root, from the kernel's table (octal escapes decoded).
mounts_under_root() {
  awk '{ print $2 }' /proc/self/mounts | while IFS= read -r m; do
    m="$(printf '%b' "$m")"
    case "$m" in "$DEB13_ROOT"|"$DEB13_ROOT"/*) echo "$m" ;; esac
  done
}
# shellcheck disable=SC2317  # reached through the EXIT trap
cleanup() {
  local rc=$? i m
  trap - EXIT INT TERM HUP
  for ((i = ${#MOUNTED[@]} - 1; i >= 0; i--)); do
    m="${MOUNTED[$i]}"
    mountpoint -q "$m" || continue
    umount -R "$m" 2>/dev/null || umount -R -l "$m" 2>/dev/null || umount -l "$m" ||
      echo "debian13: warning: could not unmount $m" >&2
  done
  m="$(mounts_under_root)"
  if [ -n "$m" ]; then
    echo "debian13: warning: still mounted under $DEB13_ROOT:" >&2
    echo "$m" >&2
  elif [ "${#MOUNTED[@]}" -gt 0 ]; then
    log "unmounted ${#MOUNTED[@]} mounts"
  fi
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
trap 'exit 129' HUP

do_mount() {   # do_mount TARGET MOUNT-ARGS...: mounts, records TARGET for the cleanup
  local target="$1"; shift
  mkdir -p "$target"
  mount "$@" "$target"
  MOUNTED+=("$target")
}

# One user of a root at a time (two runs on one root would unmount each other's mounts).
mkdir -p "$(dirname "$DEB13_ROOT")"
exec 9>"$DEB13_ROOT.lock"
flock -n 9 || die "$DEB13_ROOT is in use by another run (lock $DEB13_ROOT.lock)"

# ---- 1. the root ---------------------------------------------------------------------------------
if [ -f "$DEB13_ROOT/$MARKER" ]; then
  log "reusing the $SUITE root $DEB13_ROOT"
else
  if [ -e "$DEB13_ROOT" ]; then
    # Never delete through a mount (the bind-mounted checkout above all).
    [ -z "$(mounts_under_root)" ] || die "$DEB13_ROOT is incomplete and has mounts under it:
$(mounts_under_root)
unmount them (umount -R) and rerun"
    log "removing the incomplete root $DEB13_ROOT"
    rm -rf --one-file-system "$DEB13_ROOT"
  fi
  if ! command -v debootstrap >/dev/null 2>&1; then
    log "installing debootstrap"
    DEBIAN_FRONTEND=noninteractive apt-get update -q
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends debootstrap
  fi
  include=()
  case "$MIRROR" in https:*) include=(--include=ca-certificates) ;; esac
  keyring=()
  [ -f /usr/share/keyrings/debian-archive-keyring.gpg ] &&
    keyring=(--keyring=/usr/share/keyrings/debian-archive-keyring.gpg)
  log "debootstrap --variant=minbase $SUITE $DEB13_ROOT $MIRROR"
  t0=$(now)
  debootstrap --variant=minbase "${keyring[@]}" "${include[@]}" "$SUITE" "$DEB13_ROOT" "$MIRROR"
  cat >"$DEB13_ROOT/etc/apt/sources.list" <<EOF
deb $MIRROR $SUITE main contrib non-free non-free-firmware
deb $MIRROR $SUITE-updates main contrib non-free non-free-firmware
deb $SECURITY $SUITE-security main contrib non-free non-free-firmware
EOF
  # No recommends (setup-debian.sh passes --no-install-recommends too) and no translation indexes.
  printf 'APT::Install-Recommends "false";\nAcquire::Languages "none";\n' \
    >"$DEB13_ROOT/etc/apt/apt.conf.d/99itertime"
  touch "$DEB13_ROOT/$MARKER"
  log "time debootstrap: $(elapsed "$t0")"
fi

# ---- 2. mounts -----------------------------------------------------------------------------------
# Mounts left by a run that was killed (SIGKILL: no cleanup) go first; the lock says none is running.
stale="$(mounts_under_root | sort -r)"
if [ -n "$stale" ]; then
  log "unmounting stale mounts under $DEB13_ROOT"
  while IFS= read -r m; do
    mountpoint -q "$m" && { umount -R "$m" 2>/dev/null || umount -R -l "$m"; }
  done <<<"$stale"
fi
do_mount "$DEB13_ROOT$INSIDE" --bind "$CHECKOUT"
do_mount "$DEB13_ROOT/proc" -t proc proc
do_mount "$DEB13_ROOT/dev" --rbind /dev
mount --make-rslave "$DEB13_ROOT/dev"
do_mount "$DEB13_ROOT/sys" --rbind /sys
mount --make-rslave "$DEB13_ROOT/sys"
rm -f "$DEB13_ROOT/etc/resolv.conf"
cp -L /etc/resolv.conf "$DEB13_ROOT/etc/resolv.conf" 2>/dev/null || true

# ---- 3. inside -----------------------------------------------------------------------------------
in_root() {   # in_root CMD...: CMD in the root's /itertime, with a clean environment
  # shellcheck disable=SC2016  # $0 and $@ expand in the inner sh
  chroot "$DEB13_ROOT" /usr/bin/env -i \
    HOME=/root TERM="${TERM:-dumb}" LANG=C.UTF-8 DEBIAN_FRONTEND=noninteractive \
    PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    /bin/sh -c 'cd "$0" && exec "$@"' "$INSIDE" "$@"
}

case "$mode" in
  shell)
    log "shell in $DEB13_ROOT (checkout at $INSIDE); exit to unmount"
    set +e; in_root bash -i; exit $? ;;
  cmd)
    set +e; in_root "${cmd[@]}"; exit $? ;;
esac

t0=$(now)
log "install: launcher/scripts/setup-debian.sh"
in_root launcher/scripts/setup-debian.sh
log "time install: $(elapsed "$t0")"

t0=$(now)
# The fuzzers' parsers are the same code on both releases; the native leg runs them at their full
# 100,000 inputs, this one at ITERTIME_DEB13_FUZZ_INPUTS (default 20,000). The HDF5 readers' fuzzer keeps
# its own 8,000 (HDF5 1.14 here, 1.10 there): it would otherwise follow ITERTIME_FUZZ_INPUTS.
FUZZ_INPUTS="${ITERTIME_DEB13_FUZZ_INPUTS:-20000}"
log "build+test: ITERTIME_BUILD_DIR=$INSIDE/build-deb13 ITERTIME_FUZZ_INPUTS=$FUZZ_INPUTS launcher/scripts/test.sh $*"
set +e
in_root env ITERTIME_BUILD_DIR="$INSIDE/build-deb13" ITERTIME_FUZZ_INPUTS="$FUZZ_INPUTS" ITERTIME_FUZZ_H5_INPUTS=8000 \
  launcher/scripts/test.sh "$@"
rc=$?
set -e
log "time build+test: $(elapsed "$t0") (exit status $rc)"
exit "$rc"
