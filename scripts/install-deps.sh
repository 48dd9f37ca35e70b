#!/bin/sh
# Installs the Debian packages trainprof needs to build and test. As root it runs apt-get;
# otherwise it prints the command to run. Used by `make demo`, `make check` and .ci/run.
# --test-extras (.ci/run) adds what some tests need and otherwise skip (status 77): a real
# Prometheus server and promtool (prometheus_scrape), headless Chromium (html_browser,
# html_shot), Debian's CPU PyTorch 1.13 for /usr/bin/python3 (the torch and train_gpt tests),
# clang with its libFuzzer and sanitizer runtimes (the fuzz_run_* tests,
# tests/fuzz/README.md), and ccache, with which the wheel test (python_wheel) compiles the
# library once for its wheels. python3-pip and python3-venv: `pip wheel .` and the venvs of
# scripts/build-wheel.sh. protobuf-compiler: protoc decodes the Perfetto export in
# perfetto_protoc (skipped, 77, without it). procps: ps and kill, which the tests use. mpich:
# MPICH's launcher, mpiexec.hydra, with which summarize_mpirun and run_first_stage also run
# the first stage under Hydra (PMI) beside Open MPI's mpirun (which stays the default mpirun:
# Debian gives Open MPI's alternative the higher priority).
set -e
PKGS="build-essential cmake pkg-config zlib1g-dev libzstd-dev libcjson-dev libcmocka-dev python3 python3-dev python3-pip python3-venv libopenmpi-dev openmpi-bin libmicrohttpd-dev libncurses-dev protobuf-compiler procps"
[ "${1:-}" = "--test-extras" ] && PKGS="$PKGS prometheus chromium python3-torch clang libclang-rt-14-dev ccache mpich"
missing=""
for p in $PKGS; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
[ -z "$missing" ] && exit 0
if [ "$(id -u)" = 0 ]; then
  echo "trainprof: installing:$missing"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq || true
  apt-get install -y -qq --no-install-recommends $missing
else
  echo "trainprof: missing Debian packages:$missing"
  echo "run: sudo apt-get install -y$missing"
  exit 1
fi
