#!/usr/bin/env bash
# Prepares a fresh machine for the demo and the tests, and reuses what an earlier run built:
#   1. the virtualenv .venv with requirements-dev.txt and requirements-lint.txt (the static checks' tools),
#      re-installed only when any requirements file changes;
#   2. etcd and kube-apiserver for the local world (scripts/install-kube-assets.sh; cached outside the repo).
set -euo pipefail
export JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION=20
cd "$(dirname "$0")/.."

say() { echo "[bootstrap] $*" >&2; }
PY="${PYTHON:-python3}"

stamp=.venv/.requirements.sha256
want="$(cat requirements.txt requirements-dev.txt requirements-lint.txt | sha256sum | cut -d' ' -f1)"
if [ ! -x .venv/bin/python ] || [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  [ -x .venv/bin/python ] || { say "creating .venv with $($PY --version)"; "$PY" -m venv .venv; }
  say "installing requirements-dev.txt and requirements-lint.txt into .venv (about a minute the first time)"
  .venv/bin/python -m pip install --quiet --disable-pip-version-check -r requirements-dev.txt \
    -r requirements-lint.txt 2>&1 \
    | grep -v "is ignored: it is neither a file nor a directory" || true
  .venv/bin/python -c "import aws_cdk, moto, kubernetes, aws_lambda_powertools, importlinter, mypy" \
    && .venv/bin/ruff --version >/dev/null \
    || { say "the requirements did not install"; exit 1; }
  echo "$want" > "$stamp"
else
  say ".venv is up to date"
fi

# The tests compare our drain with `kubectl drain` and dry-run the agent's manifests with `kubectl apply -k`.
# This kind of machine ships kubectl v1.32; elsewhere fall back to Debian's kubernetes-client (v1.20).
if ! command -v kubectl >/dev/null 2>&1; then
  say "kubectl not found: installing Debian's kubernetes-client"
  SUDO=""; [ "$(id -u)" = 0 ] || SUDO=sudo
  $SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq kubernetes-client >/dev/null
fi

if [ -z "${KUBEBUILDER_ASSETS:-}" ]; then
  KUBEBUILDER_ASSETS="$(scripts/install-kube-assets.sh | tail -1)"
fi
say "kube assets in $KUBEBUILDER_ASSETS"
