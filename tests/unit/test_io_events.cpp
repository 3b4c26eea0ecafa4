#include "latgov/io_events.hpp"

#include <doctest/doctest.h>
#include <string>
#include <sys/prctl.h>

using namespace latgov;

TEST_CASE("the wake-up filter names the governed disks and leaves out latgovd's own IO") {
    char comm[17] = {};
    REQUIRE(::prctl(PR_GET_NAME, comm) == 0);
    const std::string self = std::string("comm != \"") + comm + "\"";
    const std::string kernel = R"(!(comm ~ "kworker/*") && !(comm ~ "jbd2/*"))";
    CHECK(dev_filter({266338304, 8388608}) == "dev == 266338304 || dev == 8388608");
    CHECK(own_requests_excluded(dev_filter({266338304, 8388608})) ==
          "(dev == 266338304 || dev == 8388608) && " + self + " && " + kernel);
    // Every disk watched (a hidden multipath path): only the writers are left out.
    CHECK(own_requests_excluded("") == self + " && " + kernel);
}
