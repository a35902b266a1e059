# The simulator for bench/run, in processes of its own, and their end: sourced with $PG
# (the binary) and $WORK (a scratch folder) set. Every simulator start_mock starts is killed
# when the script exits — `start_mock` runs inside `$(…)`, a subshell, so the script's own
# `jobs -p` never sees it: its PID is written down instead.

# Kills every simulator started, then removes the scratch folder.
stop_mocks() {
  if [ -f "$WORK/mock.pids" ]; then
    # shellcheck disable=SC2046
    kill $(cat "$WORK/mock.pids") 2>/dev/null || true
  fi
  rm -rf "$WORK"
}
trap stop_mocks EXIT

# Starts the simulator with extra flags; prints its base URL.
start_mock() {
  local out="$WORK/mock.$$.$RANDOM"
  "$PG" mock --port 0 "$@" > "$out" 2>&1 &
  echo $! >> "$WORK/mock.pids"
  for _ in $(seq 100); do
    grep -q listening "$out" 2>/dev/null && break
    sleep 0.05
  done
  awk '/listening/ {print $NF}' "$out"
}
