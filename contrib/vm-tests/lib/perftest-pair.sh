# SPDX-License-Identifier: BSD-3-Clause
# shellcheck shell=bash disable=SC2154 # work and test_args: the caller's
# Sourced by the VM test scripts that run ucx_perftest as a server and a
# client on one node (30-stock-ucx.sh, 70-debian13-ucx.sh).
#
# The caller sets:
#   work        a directory for the logs
#   test_args   an array: ucx_perftest's arguments, for both sides
#   PAIR_SERVER_LIMIT, PAIR_CLIENT_LIMIT
#               seconds before the server is killed / the client timed
#               out (defaults 150 and 120)

# perftest_pair NAME [wrapper...]: a server, then a client (retried while
# the server is not listening yet), each run as "wrapper... ucx_perftest".
# Logs: $work/NAME.srv, $work/NAME.cli; the UCX libraries mapped in the
# server: $work/NAME.maps.  Prints one line with both exit statuses and
# the client's final line, and the logs' tails when one failed.  Returns
# 0 when both sides exited 0.
perftest_pair() {
    local name=$1 port=$((20000 + RANDOM % 20000)) spid wd try rc=1 src
    shift
    "$@" ucx_perftest -p $port "${test_args[@]}" >"$work/$name.srv" 2>&1 &
    spid=$!
    ( sleep "${PAIR_SERVER_LIMIT:-150}"; kill -9 $spid 2>/dev/null ) &
    wd=$!
    for try in $(seq 1 100); do
        grep -q libuct /proc/$spid/maps 2>/dev/null && break
        sleep 0.2
    done
    grep -o '/[^ ]*libuc[mst][^ ]*' /proc/$spid/maps 2>/dev/null |
        sort -u >"$work/$name.maps"
    for try in $(seq 1 30); do
        sleep 1
        kill -0 $spid 2>/dev/null || break
        timeout "${PAIR_CLIENT_LIMIT:-120}" "$@" ucx_perftest -p $port \
            "${test_args[@]}" 127.0.0.1 >"$work/$name.cli" 2>&1
        rc=$?
        [ $rc -eq 0 ] && break
        grep -qi "connect\|refused" "$work/$name.cli" || break
    done
    wait $spid
    src=$?
    kill $wd 2>/dev/null
    wait $wd 2>/dev/null
    echo "--- $name: client exit $rc (after $try tries), server exit $src:" \
        "$(grep -sE '^Final:' "$work/$name.cli" | tail -n 1)"
    [ $rc -eq 0 ] && [ $src -eq 0 ] && return 0
    tail -n 8 "$work/$name.cli" "$work/$name.srv" | sed 's/^/  /'
    return 1
}

# perftest_bandwidth FILE: MB/s, the "total" bandwidth column of the
# client's last final line
perftest_bandwidth() {
    awk '/^Final:/ {v = $(NF - 2)} END {print v}' "$1"
}
