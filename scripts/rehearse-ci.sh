#!/usr/bin/env bash
# A fresh-machine rehearsal of CI: makes a new Debian 12 root with debootstrap (nothing in it but
# Debian's minimal base), clones the committed HEAD of this checkout into it and runs `.ci/run`
# there as CI does (as root, CI=true, no standard input, a clean environment). Every system
# package, the Rust toolchain (rustup), the sample clip and the NVRTC wheels must then come from
# the project's own scripts, so a missing install step fails here instead of on the next CI
# machine, which may be a fresh one.
#
#   scripts/rehearse-ci.sh                 -> log in $ROOT_DIR/rehearsal.log, exit status of .ci/run
#   scripts/rehearse-ci.sh --keep          keep the root afterwards (to look inside; else removed)
#   scripts/rehearse-ci.sh --again         after a fix: .ci/run again in the root a --keep run
#                                          left, its clone moved to this checkout's HEAD (what
#                                          setup installed stays: only later steps run fresh)
#   REHEARSAL_DIR=/big/disk scripts/rehearse-ci.sh   where the root goes (default /var/tmp)
#
# Run it after any change to an install step (scripts/setup.sh, build-aarch64.sh,
# test-aarch64.sh, test-analytics.sh), a new system dependency or a new CI step. It takes as long
# as a cold CI (about 35 min on 2 cores) and needs about 15 GB free. Needs root (debootstrap,
# chroot, mounts). The machine's network is shared with the root, as on CI: the tests' servers
# listen on 127.0.0.1.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
keep=0 again=0
case "${1:-}" in
  --keep) keep=1 ;;
  --again) keep=1 again=1 ;;
  "") ;;
  *) echo "rehearse-ci: unknown argument $1 (--keep, --again)" >&2; exit 2 ;;
esac
if [ "$(id -u)" != 0 ]; then
  echo "rehearse-ci: needs root (debootstrap, chroot and mounts)" >&2; exit 1
fi
command -v debootstrap >/dev/null 2>&1 || {
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends debootstrap; }
base=${REHEARSAL_DIR:-/var/tmp}/morphoscope-ci-rehearsal
chr="$base/root"
log="$base/rehearsal.log"
commit=$(git -C "$root" rev-parse HEAD)

mounts_in_root() { awk -v p="$chr/" 'index($2, p) == 1 {print $2}' /proc/mounts | sort -r; }
unmount_all() {
  local m
  for m in $(mounts_in_root); do umount "$m" 2>/dev/null || umount -l "$m" || true; done
}
finish() {
  unmount_all
  if [ "$keep" = 0 ] && [ -z "$(mounts_in_root)" ]; then rm -rf "$chr"; fi
}
# A root a killed rehearsal left behind goes first, its mounts before anything is deleted.
unmount_all
if [ -n "$(mounts_in_root)" ]; then
  echo "rehearse-ci: cannot unmount $(mounts_in_root | head -n 1)" >&2; exit 1
fi
# The network's TLS trust belongs to the network, not to the machine: where it reaches the
# registries through an inspecting proxy, its CA certificates (and pip's setting, and the
# variables that name the bundle) are what every machine on it, CI's included, has; the root
# trusts them once setup.sh installs ca-certificates.
tls_env=()
for v in SSL_CERT_FILE SSL_CERT_DIR CURL_CA_BUNDLE PIP_CERT REQUESTS_CA_BUNDLE GIT_SSL_CAINFO; do
  [ -n "${!v:-}" ] && tls_env+=("$v=${!v}")
done
make_root() {
  rm -rf "$chr"
  mkdir -p "$chr"
  debootstrap --variant=minbase bookworm "$chr" http://deb.debian.org/debian > "$base/debootstrap.log" 2>&1 || {
    tail -20 "$base/debootstrap.log" >&2; echo "rehearse-ci: debootstrap failed" >&2; return 1; }
  cp /etc/resolv.conf "$chr/etc/resolv.conf"
  if ls /usr/local/share/ca-certificates/*.crt >/dev/null 2>&1; then
    mkdir -p "$chr/usr/local/share/ca-certificates"
    cp /usr/local/share/ca-certificates/*.crt "$chr/usr/local/share/ca-certificates/"
  fi
  if [ -f /etc/pip.conf ]; then cp /etc/pip.conf "$chr/etc/pip.conf"; fi
  # The clone CI makes: committed work only, no build outputs, no untracked files.
  git clone -q --no-hardlinks "$root" "$chr/src/morphoscope"
  git -C "$chr/src/morphoscope" checkout -q "$commit"
}
start=$(date +%s)
trap finish EXIT
if [ "$again" = 1 ]; then
  [ -d "$chr/src/morphoscope/.git" ] || { echo "rehearse-ci: no root left by --keep in $chr" >&2; exit 1; }
  git -C "$chr/src/morphoscope" fetch -q "$root" "$commit"
  git -C "$chr/src/morphoscope" checkout -q -f "$commit"
  echo "rehearse-ci: .ci/run again in $chr on $commit; log: $log"
else
  echo "rehearse-ci: a fresh Debian 12 root in $chr (debootstrap), then .ci/run on $commit; log: $log"
  make_root
fi
mount -t proc proc "$chr/proc"
mount -t sysfs sysfs "$chr/sys"
mount --bind /dev "$chr/dev"
mount -t devpts devpts "$chr/dev/pts" -o newinstance,ptmxmode=0666
mount -t tmpfs tmpfs "$chr/dev/shm"
set +e
chroot "$chr" /usr/bin/env -i HOME=/root PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
  CI=true LANG=C.UTF-8 "${tls_env[@]}" /bin/bash -c 'cd /src/morphoscope && bash .ci/run' < /dev/null > "$log" 2>&1
status=$?
set -e
elapsed=$(( $(date +%s) - start ))
tail -n 30 "$log"
echo "rehearse-ci: .ci/run exited $status after $((elapsed / 60)) min $((elapsed % 60)) s (root included) on $commit; whole log: $log"
exit "$status"
