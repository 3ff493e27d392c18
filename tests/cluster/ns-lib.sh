# shellcheck shell=bash
# The sourcing script sets dir and holder (and may set wait_logs).
# shellcheck disable=SC2154
# Shared by up.sh and flux-up.sh (sourced, not run): starting a process inside
# the cluster's namespaces and waiting for it. Both need $dir (the cluster's
# folder) and $holder (the PID holding its network and mount namespaces).

# start NAME CMD...: runs CMD inside the namespaces, logs to DIR/logs/NAME.log,
# records its PID (nsenter execs CMD, so $! is CMD itself).
start() {
  local name=$1; shift
  TMPDIR="$dir/tmp" nsenter -t "$holder" -n -m -- "$@" >"$dir/logs/$name.log" 2>&1 &
  echo $! > "$dir/pids/$name"
}

# wait_for WHAT SECONDS CMD...: polls CMD until it succeeds, or fails with the
# tail of the logs named in $wait_logs (default: every log in DIR/logs).
wait_for() {
  local what=$1 secs=$2; shift 2
  local deadline=$((SECONDS + secs))
  until "$@" >/dev/null 2>&1; do
    if [ $SECONDS -ge $deadline ]; then
      echo "error: $what not ready after ${secs}s; logs in $dir/logs:" >&2
      local l
      for l in ${wait_logs:-"$dir"/logs/*.log}; do
        [ -f "$l" ] && { echo "--- $l" >&2; tail -n 15 "$l" >&2; }
      done
      exit 1
    fi
    sleep 0.2
  done
}
