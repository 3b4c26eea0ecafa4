#!/usr/bin/env bash
# run-sanitized.sh SOURCE BUILD: builds latgov with clang, AddressSanitizer,
# UndefinedBehaviorSanitizer and libFuzzer instrumentation in BUILD, then
# runs the unit tests and every fuzz target (LATGOV_FUZZ_SECONDS each,
# default 15) there. Any sanitizer report or fuzzer crash fails.
set -euo pipefail
src=$1 build=$2
seconds=${LATGOV_FUZZ_SECONDS:-15}
command -v clang++ >/dev/null || { echo "clang++ is missing (scripts/deps.sh installs it)" >&2; exit 1; }
launcher=()
command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
cmake -S "$src" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_COMPILER=clang++ \
    -DLATGOV_BUILD_TESTS=ON -DLATGOV_SANITIZE=ON -DLATGOV_FUZZ=ON -DLATGOV_FUZZ_SECONDS="$seconds" "${launcher[@]}" >/dev/null
cmake --build "$build" -j2 --target latgov_core_tests latgov_edge_tests \
    latgov_tick_cost fuzz_journal fuzz_config fuzz_calibration fuzz_status fuzz_kernel_text fuzz_uevent fuzz_sysfs_tree
cd "$build"
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
# The unit tests of the libraries; unit.* (install layout, documentation
# coverage) check the programs, which this build does not make.
ctest --output-on-failure --no-tests=error -L unit -E '^unit\.' -j2
ctest --output-on-failure --no-tests=error -L fuzz -j2
