#!/bin/sh
# Assembles what the GPU checks (tests/gpu/*.sh) need on a GPU machine that can install
# nothing, from a build made here: the command, the libraries, the test programs they drive,
# and the Debian libraries those link (libcjson; libmicrohttpd with its own under mhd/).
# Usage (repository root): sh tests/gpu/make_carry.sh [BUILD_DIR] [CARRY_DIR]
# CARRY_DIR (default .devcarry) must be ignored by git (.git/info/exclude).
set -eu
B=${1:-build}
C=${2:-.devcarry}
rm -rf "$C"
mkdir -p "$C/lib" "$C/mhd"
cp -a "$B"/trainprof "$B"/libtrainprof.so* "$B"/char_lm "$C"/
cp -a "$B"/libtrainprof_mpi.so* "$C"/ 2>/dev/null || true
for t in rel_victim exit_prog comm_dump comm_apart_count libmetrics_stack_depth.so; do
    [ -e "$B/tests/$t" ] && cp -a "$B/tests/$t" "$C"/
done
cp -L /lib/x86_64-linux-gnu/libcjson.so.1 "$C/lib/"
mhd=/usr/lib/x86_64-linux-gnu/libmicrohttpd.so.12
if [ -e $mhd ]; then
    cp -L $mhd "$C/mhd/"
    for l in $(ldd $mhd | awk '$3 ~ /^\// {print $3}'); do
        case $(basename "$l") in libc.so*|libm.so*|ld-linux*) ;; *) cp -L "$l" "$C/mhd/" ;; esac
    done
fi
du -sh "$C"
