#!/usr/bin/env bash
# Prepares a fresh machine for the demo and the tests, and reuses what an earlier run built:
#   1. the virtualenv .venv with requirements-dev.txt and requirements-lint.txt (the static checks' tools),
#      re-installed only when any requirements file changes; Python 3.11 or newer: $PYTHON when set, else the
#      distribution's /usr/bin/python3 when it is 3.11 or newer and makes a venv, else python3 (why: below);
#   2. kubectl, etcd and kube-apiserver for the local world (scripts/install-kube-assets.sh; cached outside the repo).
#
# Usage: scripts/bootstrap.sh [--venv-only]
#   --venv-only  step 1 only: what `make synth` and `make lint` need (no apt-get, no Go build).
# Exits 1 with a one-line message when a step fails (Python too old or missing, requirements not installed).
set -euo pipefail
export JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION=20
cd "$(dirname "$0")/.."

say() { echo "[bootstrap] $*" >&2; }
die() { say "error: $*"; exit 1; }

# shellcheck source=lib/progress.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib/progress.sh"

venv_only=""
case "${1:-}" in
  "") ;;
  --venv-only) venv_only=1 ;;
  -h | --help) sed -n '2,9s/^# \{0,1\}//p' "$0"; exit 0 ;;
  *) die "unknown option $1 (usage: scripts/bootstrap.sh [--venv-only])" ;;
esac

PY="${PYTHON:-python3}"
MIN_MAJOR=3 MIN_MINOR=11

# Refuses an interpreter older than 3.11 (the code uses datetime.UTC and 3.11's fromisoformat; 3.10 fails later
# with "Invalid isoformat string"). Compared as numbers, so 3.9 < 3.11 < 3.12.
require_python() { # <interpreter> <what to do about it>
  local py="$1" fix="$2" version major minor
  version="$("$py" -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null)" \
    || die "no Python at '$py'; $fix"
  IFS=. read -r major minor <<<"$version"
  if ! [[ "$major" =~ ^[0-9]+$ && "$minor" =~ ^[0-9]+$ ]]; then
    die "'$py' reports version '$version', not a Python version; $fix"
  fi
  if (( major < MIN_MAJOR || (major == MIN_MAJOR && minor < MIN_MINOR) )); then
    die "Python $MIN_MAJOR.$MIN_MINOR or newer is needed, '$py' is $version; $fix"
  fi
}

# Without $PYTHON, a new .venv is made with the distribution's interpreter when it can be: Debian builds its CPython
# with profile-guided optimisation and link-time optimisation into a static executable, while pyenv (this kind of
# machine's python3) and other source builds without --enable-optimizations make an interpreter that calls into a
# shared libpython; the simulation ran 15-23 % slower on the latter (BENCHMARKS.md, "The fleet simulation's speed per
# seed"). Too old (3.9 on macOS), missing, or unable to make a venv (Debian's python3.11-venv not installed): python3.
DISTRO_PY="${BOOTSTRAP_DISTRO_PYTHON:-/usr/bin/python3}"  # another path only for the tests
distro_python() {
  [ -z "${PYTHON:-}" ] && [ -x "$DISTRO_PY" ] \
    && "$DISTRO_PY" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null
}

if [ -x .venv/bin/python ]; then
  require_python .venv/bin/python "remove .venv and run again with PYTHON=/path/to/python3.11 (or newer)"
elif distro_python && "$DISTRO_PY" -m venv .venv >/dev/null 2>&1; then
  say "created .venv with the distribution's $("$DISTRO_PY" --version) ($DISTRO_PY; PYTHON= chooses another)"
else
  rm -rf .venv  # a venv the distribution's interpreter began and could not finish
  require_python "$PY" "run again with PYTHON=/path/to/python3.11 (or newer)"
fi

stamp=.venv/.requirements.sha256
want="$(cat requirements.txt requirements-dev.txt requirements-lint.txt | sha256sum | cut -d' ' -f1)"
if [ ! -x .venv/bin/python ] || [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  [ -x .venv/bin/python ] || { say "creating .venv with $("$PY" --version) (a few seconds)"; "$PY" -m venv .venv; }
  say "installing requirements-dev.txt and requirements-lint.txt into .venv (2-7 minutes the first time, quiet)"
  start=$(date +%s)
  progress_start "installing requirements"
  # pip's own status decides (pipefail); the filter only drops a known harmless warning and may print nothing.
  { .venv/bin/python -m pip install --quiet --disable-pip-version-check -r requirements-dev.txt \
      -r requirements-lint.txt 2>&1; } \
    | { grep -v "is ignored: it is neither a file nor a directory" >&2 || true; } \
    || die "pip install failed (output above)"
  progress_stop
  .venv/bin/python -c "import aws_cdk, moto, kubernetes, aws_lambda_powertools, importlinter, mypy" \
    && .venv/bin/ruff --version >/dev/null \
    || die "the requirements did not install"
  echo "$want" > "$stamp"
  say "requirements installed in $(( $(date +%s) - start )) s"
else
  say ".venv is up to date"
fi

[ -z "$venv_only" ] || exit 0

# The tests compare our drain with `kubectl drain` and dry-run the agent's manifests with `kubectl apply -k`.
# This kind of machine ships kubectl v1.32; elsewhere fall back to Debian's kubernetes-client (v1.20).
if ! command -v kubectl >/dev/null 2>&1; then
  say "kubectl not found: installing Debian's kubernetes-client with apt-get (about a minute)"
  SUDO=""; [ "$(id -u)" = 0 ] || SUDO=sudo
  progress_start "installing kubernetes-client"
  $SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq kubernetes-client >/dev/null
  progress_stop
fi

if [ -z "${KUBEBUILDER_ASSETS:-}" ]; then
  # tail reads to the end, so the script never gets SIGPIPE; its exit status decides (pipefail).
  KUBEBUILDER_ASSETS="$(scripts/install-kube-assets.sh | tail -1)"
fi
say "kube assets in $KUBEBUILDER_ASSETS"
