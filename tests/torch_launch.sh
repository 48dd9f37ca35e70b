#!/bin/sh
# A minimal torchrun for old torch (torch 1.13's torchrun fails on Python 3.11): starts
# NPROC local ranks of CMD with the variables torchrun sets (RANK, LOCAL_RANK, WORLD_SIZE,
# LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT), waits for all of them, and stops the others
# when one fails (a gloo rank would otherwise wait 30 min for its peer).
# usage: torch_launch.sh NPROC PORT CMD [ARGS...]
set -u
n=$1 port=$2
shift 2
export MASTER_ADDR=127.0.0.1 MASTER_PORT=$port WORLD_SIZE=$n LOCAL_WORLD_SIZE=$n
pids=
r=0
while [ $r -lt "$n" ]; do
    RANK=$r LOCAL_RANK=$r "$@" &
    pids="$pids $!"
    r=$((r + 1))
done
status=0
# the first rank to exit decides: a failure stops the rest
while :; do
    alive=
    for p in $pids; do
        if kill -0 "$p" 2>/dev/null; then
            alive="$alive $p"
        else
            wait "$p"
            rc=$?
            if [ $rc -ne 0 ]; then
                status=$rc
                for q in $pids; do kill "$q" 2>/dev/null; done
            fi
        fi
    done
    pids=$alive
    [ -z "$pids" ] && break
    sleep 0.2
done
echo "launcher: exit status $status"
exit $status
