#!/usr/bin/env bash
# Installs etcd and kube-apiserver for the local test world, once, into a cache outside the repository.
#
# kube-apiserver has no binary reachable from here, so it is built from Debian's `kubernetes` source package
# (see DESIGN.md, "Local test world"); etcd comes from Debian's `etcd-server`. A second run finds the cache and
# does nothing. Prints the KUBEBUILDER_ASSETS folder on its last line.
#
# Environment: KUBE_ASSETS_DIR (default ~/.cache/aws-node-manager/kube-assets).
set -euo pipefail

ASSETS="${KUBE_ASSETS_DIR:-$HOME/.cache/aws-node-manager/kube-assets}"
BUILD="$(dirname "$ASSETS")/kube-build"
mkdir -p "$ASSETS" "$BUILD"

say() { echo "[kube-assets] $*" >&2; }

# shellcheck source=lib/progress.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib/progress.sh"

SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi

need_apt=()
command -v etcd >/dev/null 2>&1 || [ -x /usr/bin/etcd ] || need_apt+=(etcd-server)
if [ ! -x "$ASSETS/kube-apiserver" ]; then
  command -v go >/dev/null 2>&1 || need_apt+=(golang-go)
  command -v rsync >/dev/null 2>&1 || need_apt+=(rsync)
  command -v jq >/dev/null 2>&1 || need_apt+=(jq)
  command -v dpkg-source >/dev/null 2>&1 || need_apt+=(dpkg-dev)
fi

if [ ! -x "$ASSETS/kube-apiserver" ] || [ ${#need_apt[@]} -gt 0 ]; then
  src_list=/etc/apt/sources.list.d/debian-src.sources
  if [ ! -x "$ASSETS/kube-apiserver" ] && [ ! -f "$src_list" ]; then
    say "adding a deb-src entry ($src_list)"
    sed 's/^Types: deb$/Types: deb-src/' /etc/apt/sources.list.d/debian.sources | $SUDO tee "$src_list" >/dev/null
  fi
  say "apt-get update (up to a minute)"
  progress_start "running apt-get update"
  $SUDO apt-get update -qq
  progress_stop
  if [ ${#need_apt[@]} -gt 0 ]; then
    say "apt-get install ${need_apt[*]} (1-3 minutes; golang-go is the large one)"
    progress_start "installing ${need_apt[*]}"
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${need_apt[@]}" >/dev/null
    progress_stop
  fi
fi

ln -sf "$(command -v etcd || echo /usr/bin/etcd)" "$ASSETS/etcd"

if [ ! -x "$ASSETS/kube-apiserver" ]; then
  cd "$BUILD"
  if ! ls -d kubernetes-*/ >/dev/null 2>&1; then
    say "apt-get source kubernetes into $BUILD (about 35 MB to download and unpack, a minute or two)"
    progress_start "downloading and unpacking the kubernetes source"
    apt-get source -qq kubernetes >/dev/null
    progress_stop
  fi
  srcs=(kubernetes-*/)
  src="${srcs[0]}"
  cd "$src"
  mkdir -p .go/src/k8s.io
  [ -e .go/src/k8s.io/kubernetes ] || ln -s ../../.. .go/src/k8s.io/kubernetes
  say "building kube-apiserver from $src (about 5 minutes on 2 cores)"
  start=$(date +%s)
  # make prints a line or two, then the Go build is silent for minutes (12 on a loaded machine): say it still runs.
  progress_start "building kube-apiserver"
  ( GOPATH="$PWD/.go" GOFLAGS=-mod=vendor GO111MODULE=off CGO_ENABLED=0 make WHAT=cmd/kube-apiserver 2>&1 ) | \
    while IFS= read -r line; do say "  $line"; done
  progress_stop
  cp _output/bin/kube-apiserver "$ASSETS/kube-apiserver.tmp"
  mv "$ASSETS/kube-apiserver.tmp" "$ASSETS/kube-apiserver"
  say "built in $(( $(date +%s) - start )) s"
fi

"$ASSETS/kube-apiserver" --version >&2
# Not `| head -1`: under pipefail, etcd killed by SIGPIPE after head exits fails the script (exit 141).
etcd_version="$("$ASSETS/etcd" --version 2>&1)"
echo "${etcd_version%%$'\n'*}" >&2
echo "$ASSETS"
