// The CPUs this test process may run on, for tests that pin threads.
// A test that needs two of them fails with fewer, and says so in its name,
// "(two CPUs)": a package build on a one-CPU builder leaves out the tests
// of that name, and prints that it did (debian/rules).
#pragma once

#include <doctest/doctest.h>
#include <sched.h>
#include <vector>

inline std::vector<int> allowed_cpus() {
    cpu_set_t set;
    CPU_ZERO(&set);
    REQUIRE(::sched_getaffinity(0, sizeof set, &set) == 0);
    std::vector<int> cpus;
    for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu)
        if (CPU_ISSET(static_cast<unsigned>(cpu), &set))
            cpus.push_back(cpu);
    return cpus;
}
