# Sourced by scripts/bootstrap.sh and scripts/install-kube-assets.sh after they define `say`.
# While a quiet step runs, a line every PROGRESS_EVERY seconds (30) saying it still runs. The sleep does not hold
# stdout/stderr, so a caller reading them is not kept waiting once the step is over.
progress_pid=""
progress_start() { # <what>
  local what="$1" start
  start=$(date +%s)
  ( while sleep "${PROGRESS_EVERY:-30}" >/dev/null 2>&1 </dev/null; do
      say "  ... still $what ($(( $(date +%s) - start )) s so far)"
    done ) >/dev/null &
  progress_pid=$!
}
progress_stop() { [ -z "$progress_pid" ] || kill "$progress_pid" 2>/dev/null || true; progress_pid=""; }
trap progress_stop EXIT
