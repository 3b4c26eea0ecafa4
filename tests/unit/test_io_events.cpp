// The wake-up filters: which requests of which disks wake an idle daemon,
// within the kernel's limit of a page per filter.
#include "latgov/discovery.hpp"
#include "latgov/governor.hpp"
#include "latgov/io_events.hpp"
#include "machines.hpp"
#include "scratch.hpp"

#include <cstdio>
#include <cstdlib>
#include <doctest/doctest.h>
#include <filesystem>
#include <fstream>
#include <string>
#include <sys/prctl.h>
#include <unistd.h>

#ifndef LATGOV_SOURCE_DIR
#error "LATGOV_SOURCE_DIR must name the source tree (it holds tests/golden)"
#endif

using namespace latgov;
namespace fs = std::filesystem;

namespace {

constexpr std::uint32_t dev_of(std::uint32_t major, std::uint32_t minor) {
    return major << 20 | minor;
}

// Whether a device part of a filter ("dev == N || (dev >= A && dev <= B)")
// matches a request on `dev`; "" matches every request. Fails the test on a
// term it does not know.
bool matches(const std::string& part, std::uint32_t dev) {
    if (part.empty())
        return true;
    std::size_t at = 0;
    for (;;) {
        const std::size_t end = part.find(" || ", at);
        const std::string term = part.substr(at, end == std::string::npos ? end : end - at);
        unsigned long a = 0, b = 0;
        int used = 0;
        if (std::sscanf(term.c_str(), "dev == %lu%n", &a, &used) == 1 &&
            static_cast<std::size_t>(used) == term.size()) {
            if (dev == a)
                return true;
        } else if (std::sscanf(term.c_str(), "(dev >= %lu && dev <= %lu)%n", &a, &b, &used) == 2 &&
                   static_cast<std::size_t>(used) == term.size()) {
            if (dev >= a && dev <= b)
                return true;
        } else {
            FAIL("unknown filter term: ", term);
        }
        if (end == std::string::npos)
            return false;
        at = end + 4;
    }
}

bool any_matches(const std::vector<std::string>& parts, std::uint32_t dev) {
    for (const auto& part : parts)
        if (matches(part, dev))
            return true;
    return false;
}

HardwareQueue irq_queue(int irq, int cpu) {
    HardwareQueue q;
    q.irq = irq;
    q.irq_name = "nvme0q1";
    q.completion_cpus = {cpu};
    q.submit_cpus = {cpu};
    q.completion_source = CompletionSource::irq_effective_affinity;
    return q;
}

// `disks` NVMe namespaces, each with two partitions (so their dev_t are
// not consecutive: every disk is a term of its own), and a loop device.
Topology many_disks(int disks) {
    Topology t;
    t.online_cpus = {0, 1};
    for (int id : {0, 1}) {
        Cpu cpu;
        cpu.id = id;
        cpu.idle_states = {{0, "POLL", 0, 0, false}, {1, "C1", 1, 1, false}};
        t.cpus.push_back(cpu);
    }
    for (int i = 0; i < disks; ++i) {
        BlockDevice nvme;
        nvme.name = "nvme" + std::to_string(i) + "n1";
        nvme.dev = "259:" + std::to_string(3 * i);
        nvme.kind = DeviceKind::nvme;
        nvme.controller = "nvme" + std::to_string(i);
        nvme.queues = {irq_queue(100 + i, i % 2)};
        t.devices.push_back(nvme);
    }
    t.devices.push_back(loop_device());
    return t;
}

} // namespace

TEST_CASE("the wake-up filter names the governed disks and leaves out latgovd's own IO") {
    char comm[17] = {};
    REQUIRE(::prctl(PR_GET_NAME, comm) == 0);
    const std::string self = std::string("comm != \"") + comm + "\"";
    const std::string kernel =
        R"(!(comm ~ "latgovd/*") && !(comm ~ "kworker/*") && !(comm ~ "jbd2/*"))";
    const WatchedDevs two{{266338304, 8388608}, false, {}};
    CHECK(request_filter_terms(two) ==
          std::vector<std::string>{"dev == 8388608", "dev == 266338304"});
    // And the requests nobody waits for: asynchronous writes.
    const std::string waited =
        R"((rwbs ~ "R*" || rwbs ~ "WS*" || rwbs ~ "WFS*" || rwbs ~ "FWS*" || rwbs ~ "FWFS*" || )"
        R"(rwbs ~ "DS*" || rwbs ~ "DES*" || rwbs ~ "NS*"))";
    CHECK(wakeup_filters(two, 4095) ==
          std::vector<std::string>{"(dev == 8388608 || dev == 266338304) && " + self + " && " +
                                   kernel + " && " + waited});
    // Nothing to tell disks apart by: only the writers and the kind.
    CHECK(own_requests_excluded("") == self + " && " + kernel);
    CHECK(wakeup_filters(WatchedDevs{}, 4095) ==
          std::vector<std::string>{self + " && " + kernel + " && " + waited});
    // The passthrough event beside: the same disks and writers, and
    // passthrough's kind, whose submitter always waits.
    CHECK(passthrough_filter("dev == 1 || dev == 2") ==
          "(dev == 1 || dev == 2) && " + self + " && " + kernel + R"( && rwbs ~ "N*")");
    CHECK(passthrough_filter("") == self + " && " + kernel + R"( && rwbs ~ "N*")");
}

TEST_CASE("disks with consecutive dev_t are one range term") {
    const WatchedDevs run{
        {dev_of(259, 2), dev_of(259, 0), dev_of(259, 1), dev_of(8, 16)}, false, {}};
    CHECK(request_filter_terms(run) ==
          std::vector<std::string>{"dev == 8388624", "(dev >= 271581184 && dev <= 271581186)"});
}

TEST_CASE("250 governed disks are split over filters that each fit in a page") {
    const Topology t = many_disks(250);
    const Governor g(t, default_config(), declared_costs(t));
    const WatchedDevs watched = g.watched_devs();
    REQUIRE(watched.devs.size() == 250);
    // One filter would not fit: that is what the kernel refused.
    std::size_t one_filter = 0;
    for (const auto& term : request_filter_terms(watched))
        one_filter += term.size() + 4;
    CHECK(one_filter + own_requests_excluded("").size() > 4095);

    const auto filters = wakeup_filters(watched, 4095);
    CHECK(filters.size() == 2);
    for (const auto& f : filters)
        CHECK(f.size() <= 4095);
    const auto parts = device_filters(watched, wakeup_filter("").size(), 4095);
    REQUIRE(parts.size() == filters.size());
    for (std::size_t i = 0; i < parts.size(); ++i) {
        CHECK(filters[i] == wakeup_filter(parts[i]));
        // The passthrough event's filter fits beside it.
        CHECK(passthrough_filter(parts[i]).size() <= 4095);
    }
    // Every governed disk wakes the daemon, its partitions' numbers and the
    // ungoverned loop0 do not.
    for (int i = 0; i < 250; ++i) {
        const auto disk = dev_of(259, static_cast<std::uint32_t>(3 * i));
        CHECK(any_matches(parts, disk));
        CHECK_FALSE(any_matches(parts, disk + 1));
    }
    CHECK_FALSE(any_matches(parts, dev_of(7, 0)));

    // The per-CPU request counters' filters (a longer suffix) fit as well.
    const std::string waited =
        R"((rwbs ~ "R*" || rwbs ~ "WS*" || rwbs ~ "WFS*" || rwbs ~ "FWS*" || rwbs ~ "FWFS*" || )"
        R"(rwbs ~ "DS*" || rwbs ~ "DES*" || rwbs ~ "NS*"))";
    for (const auto& part : device_filters(watched, waited.size(), 4095))
        CHECK(("(" + part + ") && " + waited).size() <= 4095);
}

TEST_CASE("a page of 64 KiB takes the 250 disks in one filter") {
    const Topology t = many_disks(250);
    const Governor g(t, default_config(), declared_costs(t));
    CHECK(wakeup_filters(g.watched_devs(), 65535).size() == 1);
}

namespace {

// The captured VM: nvme0n1 (259:1) is a multipath head over the hidden path
// disks nvme0c0n1 (259:0) and nvme0c1n1 (259:2), whose dev_t sysfs does not
// show and /proc/diskstats does; nullb0 (254:0) is not governed.
Topology captured_multipath(const test::TempDir& tmp, bool diskstats) {
    const std::string tarball =
        std::string(LATGOV_SOURCE_DIR) + "/tests/golden/vm-multipath.tar.gz";
    const std::string untar = "tar -xzf '" + tarball + "' -C '" + tmp.path().string() + "'";
    REQUIRE(std::system(untar.c_str()) == 0);
    if (!diskstats)
        std::filesystem::remove(tmp.path() / "proc/diskstats");
    auto topology = discover_topology(SysRoot(tmp.path()));
    REQUIRE(topology);
    return *topology;
}

} // namespace

TEST_CASE("a governed multipath path disk is matched by its dev_t from /proc/diskstats") {
    test::TempDir tmp("latgov-io-events");
    const Topology topology = captured_multipath(tmp, true);
    Governor g(topology, default_config(), declared_costs(topology));
    const WatchedDevs watched = g.watched_devs();
    CHECK_FALSE(watched.hidden_paths);
    CHECK(watched.devs == std::vector<std::uint32_t>{dev_of(259, 0), dev_of(259, 2)});
    CHECK(watched.others == std::vector<std::uint32_t>{dev_of(254, 0)});
    const auto parts = device_filters(watched, own_requests_excluded("").size(), 4095);
    REQUIRE(parts.size() == 1);
    CHECK(parts[0] == "dev == 271581184 || dev == 271581186");
    CHECK_FALSE(matches(parts[0], dev_of(259, 1))); // the head issues no requests

    // A request on one path makes that path's queue active, not the other's.
    const auto* first = topology.device("nvme0c0n1");
    REQUIRE(first);
    const int cpu = first->queues.at(0).submit_cpus.at(0);
    CHECK(g.on_request_issued(dev_of(259, 0), cpu, TimePoint{} + std::chrono::milliseconds(1)));
    std::vector<std::string> active;
    for (const auto& d : g.devices())
        for (const auto& q : d.queues)
            if (q.activity.active)
                active.push_back(d.name + "/" + std::to_string(q.index));
    CHECK(active == std::vector<std::string>{"nvme0c0n1/0"});
}

TEST_CASE(
    "without /proc/diskstats a path disk is matched by the extended major, less other disks") {
    test::TempDir tmp("latgov-io-events");
    const Topology topology = captured_multipath(tmp, false);
    CHECK(topology.device("nvme0c0n1")->dev.empty());
    const Governor g(topology, default_config(), declared_costs(topology));
    const WatchedDevs watched = g.watched_devs();
    CHECK(watched.hidden_paths);
    CHECK(watched.devs.empty());
    CHECK(watched.others == std::vector<std::uint32_t>{dev_of(254, 0)});

    const auto parts = device_filters(watched, own_requests_excluded("").size(), 4095);
    REQUIRE(parts.size() == 1);
    CHECK(parts[0] == "(dev >= 271581184 && dev <= 272629759)");
    // The path disks took minors of the extended major the head did not.
    CHECK(matches(parts[0], dev_of(259, 0)));
    CHECK(matches(parts[0], dev_of(259, 2)));
    // Not every request on every disk: nullb0's do not wake the daemon.
    CHECK_FALSE(matches(parts[0], dev_of(254, 0)));
    CHECK_FALSE(matches(parts[0], dev_of(8, 0)));
}

TEST_CASE("extended-major disks that are not governed are cut out of the path disks' range") {
    const WatchedDevs watched{{dev_of(8, 0)}, true, {dev_of(259, 0), dev_of(259, 4), dev_of(7, 0)}};
    const auto terms = request_filter_terms(watched);
    CHECK(terms == std::vector<std::string>{"dev == 8388608",
                                            "(dev >= 271581185 && dev <= 271581187)",
                                            "(dev >= 271581189 && dev <= 272629759)"});
    const auto parts = device_filters(watched, 0, 4095);
    REQUIRE(parts.size() == 1);
    CHECK(matches(parts[0], dev_of(259, 2)));
    CHECK_FALSE(matches(parts[0], dev_of(259, 0)));
    CHECK_FALSE(matches(parts[0], dev_of(259, 4)));
    CHECK_FALSE(matches(parts[0], dev_of(7, 0)));
    CHECK(matches(parts[0], dev_of(8, 0)));
}

TEST_CASE("hundreds of multipath namespaces beside ungoverned NVMe disks still fit") {
    // 300 ungoverned NVMe disks every other minor: 301 gaps for the paths.
    WatchedDevs watched;
    watched.hidden_paths = true;
    for (std::uint32_t i = 0; i < 300; ++i)
        watched.others.push_back(dev_of(259, 2 * i + 1));
    const auto parts = device_filters(watched, wakeup_filter("").size(), 4095);
    CHECK(parts.size() > 1);
    for (const auto& f : wakeup_filters(watched, 4095))
        CHECK(f.size() <= 4095);
    for (std::uint32_t i = 0; i < 300; ++i) {
        CHECK(any_matches(parts, dev_of(259, 2 * i)));
        CHECK_FALSE(any_matches(parts, dev_of(259, 2 * i + 1)));
    }
    CHECK(any_matches(parts, dev_of(259, 5000)));
}

TEST_CASE("a tracepoint that cannot be read is named, with why, at each place tracefs may be") {
    test::TempDir tmp("latgov-tracefs");
    const fs::path tracing = tmp.path() / "sys/kernel/tracing/events/block/block_getrq";
    fs::create_directories(tracing / "format"); // a directory: reading it fails
    { std::ofstream(tracing / "id") << "2104\n"; }
    auto format = read_request_format(SysRoot(tmp.path()));
    REQUIRE_FALSE(format);
    const std::string& why = format.error().message;
    CHECK(
        why.starts_with("Failed to read the block/block_getrq tracepoint (is tracefs mounted?): "));
    // Mounted here, but its format unreadable; not mounted at the other.
    CHECK(why.find("/sys/kernel/tracing/events/block/block_getrq/format: Is a directory") !=
          std::string::npos);
    CHECK(why.find("/sys/kernel/debug/tracing/events/block/block_getrq/id: No such file") !=
          std::string::npos);
}
