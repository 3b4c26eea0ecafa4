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
# The unit tests of the libraries: each test program runs whole, in one
# process, the two side by side (ctest's process per test case, each with
# ASan's start-up, took 59 s on two CPUs; the two programs whole, one after
# the other, 14 s). One report or failure fails the run; leaks show at each
# program's exit. unit.* (install layout, documentation coverage) check the
# programs, which this build does not make, and bench.unit.* the bench
# harness's Python: the tick cost's smoke run is the bench's sanitized code.
programs=(latgov_core_tests latgov_edge_tests)
pids=()
for program in "${programs[@]}"; do
    (cd tests && exec "./$program") > "tests/$program.log" 2>&1 &
    pids+=($!)
done
failed=0
for i in "${!programs[@]}"; do
    if wait "${pids[i]}"; then
        tail -n 3 "tests/${programs[i]}.log"
    else
        echo "${programs[i]} failed:" >&2
        cat "tests/${programs[i]}.log" >&2
        failed=1
    fi
done
((failed == 0)) || exit 1
ctest --output-on-failure --no-tests=error -R '^bench\.tick_cost_smoke$'
ctest --output-on-failure --no-tests=error -L fuzz -j2
