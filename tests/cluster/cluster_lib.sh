# cluster_lib.sh: what the emulated cluster's test scripts share (links.sh, slow_link.sh, nodes_e2e.sh,
# link_fault.sh): their start (tests/e2e/lib.sh, the arguments by name, this folder, a work folder removed on
# exit) and a comm calibration across the nodes, run from inside the cluster.
# Invariants: sourced by a script of tests/cluster before anything else; cluster_test_start sets HERE (this
# folder, where emulated_cluster.sh is) and WORK (a fresh folder, removed when the script exits, whatever its
# status); calibrate_comm_across_nodes is exported (export -f), so that `bash -c` inside emulated_cluster.sh
# finds it, and reads only ITERTIME (exported by the script) and the cluster's ITERTIME_CLUSTER_DIR.
source "$(dirname "${BASH_SOURCE[0]}")/../e2e/lib.sh"

# cluster_test_start "USAGE" "$@": the script's arguments by the names of USAGE (take_args), then HERE and WORK.
cluster_test_start() {
  take_args "$@"
  HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
  WORK="$(mktemp -d)"
  trap 'rm -rf "$WORK"' EXIT
}

# calibrate_comm_across_nodes RANKS LOG CALIBRATE_ARGS...: `itertime calibrate comm CALIBRATE_ARGS...` with
# RANKS ranks, one per node (the cluster's mpirun, --map-by node), its stdout and stderr into LOG; on a failure
# prints LOG and returns 1.
calibrate_comm_across_nodes() {
  local ranks="$1" log="$2"
  shift 2
  "$ITERTIME_CLUSTER_DIR/mpirun" -n "$ranks" --map-by node "$ITERTIME" calibrate comm "$@" >"$log" 2>&1 ||
    { cat "$log"; return 1; }
}
export -f calibrate_comm_across_nodes
