# common.sh — sourced by the GPU check scripts (tests/gpu/*.sh), run on the GPU machine from
# the repository root with the binaries built here carried in $C (trainprof,
# libtrainprof.so, the tools, lib/ for libcjson, mhd/ for libmicrohttpd and its libraries).
# Sets TP (the CLI), W (scratch, emptied), S ($OUT/summary.txt), t0, and defines
#   say TEXT       a section heading, on stdout and in $S
#   lap STATUS     "rc=STATUS t=SECONDS" into $S
#   python_module  compiles the Python extension for this machine's interpreter into
#                  $W/pyd, exports TRAINPROF_PYTHON_DIR, and puts the carried libmicrohttpd
#                  on the library path when the machine has none (the endpoint dlopens it)
set -u
C=${C:-.devcarry}
export LD_LIBRARY_PATH=$PWD/$C:$PWD/$C/lib:${LD_LIBRARY_PATH:-}
export PYTHONUNBUFFERED=1
# The checks compare GPU figures over whole runs: GPU activity in every step, unless a check
# sets its own plan (an option beats this variable); the default plan is the benches' to
# measure (bench/megatron_capture_cost.py, which clears it).
export TRAINPROF_GPU_CAPTURE=${TRAINPROF_GPU_CAPTURE:-all}
TP=$PWD/$C/trainprof
W=/tmp/w; rm -rf $W; mkdir -p $W $OUT
S=$OUT/summary.txt
t0=$(date +%s)
say() { echo "=== $*" | tee -a $S; }
lap() { echo "rc=$1 t=$(( $(date +%s) - t0 ))s" >> $S; }

python_module() {
    PYD=$W/pyd; mkdir -p $PYD/trainprof/_autostart
    cp python/trainprof/*.py python/trainprof/*.pyi python/trainprof/py.typed $PYD/trainprof/
    cp python/trainprof/_autostart/*.py $PYD/trainprof/_autostart/
    local ext inc
    ext=$(python3 -c "import sysconfig; print(sysconfig.get_config_var('EXT_SUFFIX'))")
    inc=$(python3 -c "import sysconfig; print(sysconfig.get_paths()['include'])")
    gcc -O2 -shared -fPIC -fvisibility=hidden -I"$inc" -Iinclude -Isrc python/src/*.c \
        -L$C -ltrainprof -o $PYD/trainprof/_trainprof$ext >> $S 2>&1 ||
        echo "python module: build failed" >> $S
    export TRAINPROF_PYTHON_DIR=$PYD
    ldconfig -p | grep -q libmicrohttpd.so.12 ||
        { export LD_LIBRARY_PATH=$LD_LIBRARY_PATH:$PWD/$C/mhd; echo "libmicrohttpd: carried copy" >> $S; }
}
