// Kernel uevents: parsing the datagrams, which ones change the topology, the
// debounce of a burst, and the fingerprint the periodic check compares.
#include "latgov/rescan.hpp"
#include "latgov/uevent.hpp"

#include <doctest/doctest.h>
#include <string>

using namespace latgov;
using namespace std::chrono_literals;

namespace {

// A datagram as the kernel sends it: header and fields NUL-separated.
std::string datagram(std::initializer_list<std::string_view> parts) {
    std::string out;
    for (auto p : parts) {
        out += p;
        out += '\0';
    }
    return out;
}

const TimePoint t0 = TimePoint{} + 1000s;
long long ms(TimePoint t) {
    return std::chrono::duration_cast<std::chrono::milliseconds>(t - t0).count();
}

Topology one_disk() {
    Topology t;
    t.online_cpus = {0, 1};
    t.cpus = {{0, {{0, "POLL", 0, 0, false}}, std::nullopt, true},
              {1, {{0, "POLL", 0, 0, false}}, std::nullopt, true}};
    t.cpuidle_driver = "haltpoll";
    t.cpuidle_governor = "haltpoll";
    BlockDevice d;
    d.name = "nvme0n1";
    d.dev = "259:0";
    d.kind = DeviceKind::nvme;
    d.controller = "nvme0";
    HardwareQueue q;
    q.index = 0;
    q.irq = 24;
    q.irq_name = "nvme0q1";
    q.submit_cpus = {0, 1};
    q.completion_cpus = {0};
    q.completion_source = CompletionSource::irq_effective_affinity;
    d.queues = {q};
    t.devices = {d};
    return t;
}

} // namespace

TEST_CASE("a kernel uevent gives its action, subsystem and device path") {
    const auto e =
        parse_uevent(datagram({"add@/devices/pci0000:00/0000:00:05.0/nvme/nvme1", "ACTION=add",
                               "DEVPATH=/devices/pci0000:00/0000:00:05.0/nvme/nvme1",
                               "SUBSYSTEM=nvme", "MAJOR=240", "MINOR=1", "SEQNUM=2301"}));
    REQUIRE(e);
    CHECK(e->action == "add");
    CHECK(e->subsystem == "nvme");
    CHECK(e->devpath == "/devices/pci0000:00/0000:00:05.0/nvme/nvme1");
}

TEST_CASE("the last field needs no trailing NUL") {
    auto text = datagram({"offline@/devices/system/cpu/cpu3", "ACTION=offline",
                          "DEVPATH=/devices/system/cpu/cpu3", "SUBSYSTEM=cpu"});
    text.pop_back();
    const auto e = parse_uevent(text);
    REQUIRE(e);
    CHECK(e->subsystem == "cpu");
}

TEST_CASE("udev's re-broadcast and malformed datagrams are errors") {
    CHECK_FALSE(parse_uevent(std::string("libudev\0\xfe\xed\xca\xfe", 12)));
    CHECK_FALSE(parse_uevent(""));
    CHECK_FALSE(parse_uevent(datagram({"no header", "ACTION=add"})));
    const auto missing = parse_uevent(datagram({"add@/devices/x", "ACTION=add", "DEVPATH=/x"}));
    REQUIRE_FALSE(missing);
    CHECK(missing.error().message.find("SUBSYSTEM") != std::string::npos);
    // A key that only starts like a known one is not it.
    CHECK_FALSE(parse_uevent(datagram({"add@/x", "ACTIONS=add", "DEVPATH=/x", "SUBSYSTEM=cpu"})));
}

TEST_CASE("disks, controllers, CPUs and PCI functions change the topology, others do not") {
    CHECK(changes_topology({"add", "block", "/devices/virtual/block/nullb1"}));
    CHECK(changes_topology({"remove", "nvme", "/devices/x/nvme/nvme0"}));
    CHECK(changes_topology({"change", "nvme", "/devices/x/nvme/nvme0"}));
    CHECK(changes_topology({"offline", "cpu", "/devices/system/cpu/cpu3"}));
    CHECK(changes_topology({"online", "cpu", "/devices/system/cpu/cpu3"}));
    CHECK(changes_topology({"remove", "pci", "/devices/pci0000:00/0000:00:05.0"}));
    CHECK(changes_topology({"add", "nvme-subsystem", "/devices/virtual/nvme-subsystem/s0"}));
    CHECK_FALSE(changes_topology({"add", "net", "/devices/virtual/net/veth0"}));
    CHECK_FALSE(changes_topology({"change", "power_supply", "/devices/x/BAT0"}));
    CHECK_FALSE(changes_topology({"frobnicate", "block", "/devices/virtual/block/loop0"}));
}

TEST_CASE("nothing pending, no rescan") {
    CHECK_FALSE(burst_rescan_at(ChangeBurst{}, t0));
}

TEST_CASE("one uevent is rescanned after the quiet time") {
    const auto burst = add_change({}, t0);
    CHECK(burst.count == 1);
    CHECK(ms(*burst_rescan_at(burst, TimePoint{})) == 200);
}

TEST_CASE("every further uevent pushes the rescan out by the quiet time") {
    auto burst = add_change({}, t0);
    burst = add_change(burst, t0 + 150ms);
    burst = add_change(burst, t0 + 300ms);
    CHECK(burst.count == 3);
    CHECK(ms(*burst_rescan_at(burst, TimePoint{})) == 500);
}

TEST_CASE("a steady stream of uevents is rescanned 2 s after its first") {
    auto burst = add_change({}, t0);
    for (auto t = 100ms; t <= 5000ms; t += 100ms)
        burst = add_change(burst, t0 + t);
    CHECK(ms(*burst_rescan_at(burst, TimePoint{})) == 2000);
}

TEST_CASE("a failed rescan's back-off delays the debounced rescan") {
    const auto burst = add_change({}, t0);
    CHECK(ms(*burst_rescan_at(burst, t0 + 800ms)) == 800);
    CHECK(ms(*burst_rescan_at(burst, t0 + 50ms)) == 200);
}

TEST_CASE("the online CPU set is compared every 5 s, but not while a uevent burst is pending") {
    CHECK_FALSE(online_check_due({}, t0, t0 + 4999ms));
    CHECK(online_check_due({}, t0, t0 + 5000ms));
    // A CPU's offline uevent came 100 ms before the comparison was due: its
    // burst's rescan (200 ms quiet) maps the change, as caused by the uevent.
    const auto burst = add_change({}, t0 + 4900ms);
    CHECK_FALSE(online_check_due(burst, t0, t0 + 5000ms));
    CHECK_FALSE(online_check_due(burst, t0, t0 + 60s));
}

TEST_CASE("an NVMe asynchronous event may leave the map as it was, a reset's end does not") {
    const std::string ctrl = "/devices/pci0000:00/0000:00:04.0/nvme/nvme0";
    const auto aen =
        parse_uevent(datagram({"change@" + ctrl, "ACTION=change", "DEVPATH=" + ctrl,
                               "SUBSYSTEM=nvme", "NVME_AEN=0x000001", "NVME_LOG_PAGE=0x02"}));
    REQUIRE(aen);
    CHECK(aen->nvme_aen == "0x000001");
    CHECK(may_change_nothing(*aen)); // a temperature warning: compared, not rescanned
    const auto connected =
        parse_uevent(datagram({"change@" + ctrl, "ACTION=change", "DEVPATH=" + ctrl,
                               "SUBSYSTEM=nvme", "NVME_EVENT=connected"}));
    REQUIRE(connected);
    CHECK(connected->nvme_aen.empty());
    CHECK_FALSE(may_change_nothing(*connected)); // a reset's end: new IRQs
}

TEST_CASE("only a disk's change, or an NVMe event, may leave the map as it was") {
    CHECK(may_change_nothing({"change", "block", "/devices/virtual/block/loop0"}));
    CHECK_FALSE(may_change_nothing({"add", "block", "/devices/virtual/block/loop0"}));
    CHECK_FALSE(may_change_nothing({"change", "nvme", "/devices/virtual/nvme/nvme0"}));
    // A CPU that goes and comes back within one burst leaves the same map,
    // but its perf events were disabled and its thread unpinned.
    CHECK_FALSE(may_change_nothing({"online", "cpu", "/devices/system/cpu/cpu1"}));
    CHECK_FALSE(may_change_nothing({"offline", "cpu", "/devices/system/cpu/cpu1"}));
}

TEST_CASE("the fingerprint ignores PM QoS values and names the map") {
    const auto base = one_disk();
    auto held = base;
    held.cpus[1].resume_latency = 0u;
    held.cpu_dma_latency = 0u;
    CHECK(topology_fingerprint(held) == topology_fingerprint(base));

    SUBCASE("an IRQ moved to another CPU") {
        auto moved = base;
        moved.devices[0].queues[0].completion_cpus = {1};
        CHECK(topology_fingerprint(moved) != topology_fingerprint(base));
    }
    SUBCASE("a new IRQ number after a controller reset") {
        auto reset = base;
        reset.devices[0].queues[0].irq = 40;
        CHECK(topology_fingerprint(reset) != topology_fingerprint(base));
    }
    SUBCASE("a disk added") {
        auto added = base;
        added.devices.push_back(base.devices[0]);
        added.devices[1].name = "nvme1n1";
        CHECK(topology_fingerprint(added) != topology_fingerprint(base));
    }
    SUBCASE("another disk under the same name (a [[device]] rule may match it)") {
        auto swapped = base;
        swapped.devices[0].serial = "S5GXNX0T123456";
        CHECK(topology_fingerprint(swapped) != topology_fingerprint(base));
        swapped = base;
        swapped.devices[0].model = "Another model";
        CHECK(topology_fingerprint(swapped) != topology_fingerprint(base));
        swapped = base;
        swapped.devices[0].wwid = "eui.0025388b71b12345";
        CHECK(topology_fingerprint(swapped) != topology_fingerprint(base));
    }
    SUBCASE("a CPU offline") {
        auto offline = base;
        offline.online_cpus = {0};
        offline.cpus.pop_back();
        CHECK(topology_fingerprint(offline) != topology_fingerprint(base));
    }
}

TEST_CASE("every rescan cause has a metric label") {
    for (auto cause : all_rescan_causes)
        CHECK(to_string(cause) != "unknown");
    CHECK(to_string(RescanCause::uevent) == "uevent");
}

TEST_CASE("a host that slept between two checks is told from clock skew") {
    CHECK_FALSE(slept_between(0ns, 0ns));
    CHECK_FALSE(slept_between(5s, 5s + 20us)); // two clocks read a few microseconds apart
    CHECK(slept_between(5s, 5s + 1500ms));     // suspended 1.5 s
    CHECK(slept_between(0ns, 30s));
    CHECK_FALSE(slept_between(5s, 5s - 20us)); // the skew the other way
}

TEST_CASE("the time suspended is read between two monotonic readings, not across a preemption") {
    // Booted 100 s ago, suspended 7 s of it: BOOTTIME 107 s, MONOTONIC 100 s.
    CHECK(suspended_time(100s, 107s + 2us, 100s + 4us) == 7s);
    // Preempted 20 ms between the readings: too blurred to compare.
    CHECK_FALSE(suspended_time(100s, 107s, 100s + 20ms));
    CHECK_FALSE(suspended_time(100s, 107s, 100s - 1us));
    // A check preempted between BOOTTIME and MONOTONIC read one after the
    // other would see 20 ms less suspended, and the next one a 20 ms sleep.
    // Read in the middle, a good reading never differs by more than the
    // reading time from another.
    const auto first = suspended_time(100s, 107s + 250us, 100s + 500us);
    const auto next = suspended_time(105s, 112s, 105s + 1us);
    REQUIRE(first);
    REQUIRE(next);
    CHECK_FALSE(slept_between(*first, *next));
}
