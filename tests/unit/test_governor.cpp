// The governor on plain structs: a topology, samples and times, no files.
#include "latgov/governor.hpp"
#include "machines.hpp"

#include <algorithm>
#include <doctest/doctest.h>

using namespace latgov;
using namespace std::chrono_literals;

namespace {

HardwareQueue irq_queue(int index, int irq, CpuSet completion, CpuSet submit) {
    HardwareQueue q;
    q.index = index;
    q.irq = irq;
    q.irq_name = "nvme0q" + std::to_string(index + 1);
    q.completion_cpus = std::move(completion);
    q.submit_cpus = std::move(submit);
    q.completion_source = CompletionSource::irq_effective_affinity;
    return q;
}

// Two CPUs with Intel-like states, nvme0n1 with queue 0 (IRQ 10, completes
// on CPU 0), queue 1 (IRQ 11, CPU 1) and a poll queue, and an idle loop0.
Topology machine() {
    Topology t;
    t.online_cpus = {0, 1};
    t.cpuidle_driver = "intel_idle";
    t.cpuidle_governor = "menu";
    for (int id : {0, 1}) {
        Cpu cpu;
        cpu.id = id;
        cpu.idle_states = {{0, "POLL", 0, 0, false},
                           {1, "C1", 1, 1, false},
                           {2, "C1E", 4, 8, false},
                           {3, "C6", 170, 600, false}};
        t.cpus.push_back(cpu);
    }
    BlockDevice nvme;
    nvme.name = "nvme0n1";
    nvme.dev = "259:0";
    nvme.kind = DeviceKind::nvme;
    nvme.transport = "pcie";
    nvme.controller = "nvme0";
    nvme.queues = {irq_queue(0, 10, {0}, {0}), irq_queue(1, 11, {1}, {1})};
    HardwareQueue poll;
    poll.index = 2;
    poll.type = QueueType::poll;
    poll.submit_cpus = {0, 1};
    nvme.queues.push_back(poll);
    t.devices.push_back(nvme);
    t.devices.push_back(loop_device());
    return t;
}

IoSample sample(std::uint64_t irq10, std::uint64_t irq11, std::uint64_t ios, std::uint64_t ticks_ms,
                std::uint64_t in_flight = 0) {
    IoSample s;
    s.irq_counts.assign(12, 0);
    s.irq_counts[10] = irq10;
    s.irq_counts[11] = irq11;
    BlockStat stat;
    stat.read_ios = ios;
    stat.read_ticks_ms = ticks_ms;
    stat.in_flight = in_flight;
    s.devices = {stat};
    return s;
}

const TimePoint t0{};

// The default configuration with a [[device]] entry for loop devices.
Config loop_governed() {
    Config config = default_config();
    DeviceRule rule;
    rule.match.name = "loop*";
    rule.origin = "t.toml:1:1";
    config.devices.push_back(rule);
    return config;
}

} // namespace

TEST_CASE("by default NVMe is governed, IRQ-less loop is not, poll queues are left out") {
    Governor g(machine(), default_config(), declared_costs(machine()));
    REQUIRE(g.devices().size() == 1);
    CHECK(g.devices()[0].name == "nvme0n1");
    CHECK(g.devices()[0].queues.size() == 2);
    CHECK(g.stat_sources() == std::vector<std::string>{"nvme0n1"});
    // loop0's requests must not wake the daemon.
    CHECK(g.watched_devs() == WatchedDevs{{259u << 20}, false, {7u << 20}});
}

TEST_CASE("a device table entry brings an IRQ-less disk under governance") {
    Governor g(machine(), loop_governed(), declared_costs(machine()));
    REQUIRE(g.devices().size() == 2);
    CHECK(g.devices()[1].name == "loop0");
    CHECK(g.devices()[1].rule == "t.toml:1:1");
}

TEST_CASE("IRQ activity holds exactly the completion CPU of that queue, then lingers out") {
    Governor g(machine(), default_config(), declared_costs(machine()));
    CHECK(g.observe(sample(0, 0, 0, 0), t0)); // baseline
    CHECK_FALSE(g.any_active());
    // 2000 completions in 200 ms summed: a 100 us mean, so 10 us may be spent
    // waking: C6 (170) is excluded, C1E (4) kept.
    CHECK(g.observe(sample(2000, 0, 2000, 200), t0 + 5ms));
    CHECK(g.any_active());
    REQUIRE(g.devices()[0].latency.mean_us());
    CHECK(*g.devices()[0].latency.mean_us() == doctest::Approx(100.0));
    Holds h = g.holds();
    REQUIRE(h.percpu.size() == 1);
    CHECK(h.percpu.at(0).limit == LatencyLimit{4});
    CHECK(h.percpu.at(0).held_for == std::vector<QueueKey>{{"nvme0n1", 0}});
    // No new interrupt: held through the linger (3 ms), released after it.
    CHECK_FALSE(g.observe(sample(2000, 0, 2000, 200), t0 + 7ms));
    CHECK(g.any_active());
    CHECK(g.observe(sample(2000, 0, 2000, 200), t0 + 9ms));
    CHECK_FALSE(g.any_active());
    CHECK(g.holds().percpu.empty());
}

TEST_CASE("an active queue stays held while its device has IO in flight") {
    Governor g(machine(), default_config(), declared_costs(machine()));
    g.observe(sample(0, 0, 0, 0), t0);
    g.observe(sample(0, 5, 5, 1, 1), t0 + 5ms);
    CHECK(g.holds().percpu.count(1));
    g.observe(sample(0, 5, 5, 1, 1), t0 + 50ms); // a slow request, still in flight
    CHECK(g.holds().percpu.count(1));
    g.observe(sample(0, 5, 6, 2, 0), t0 + 60ms);
    CHECK(g.holds().percpu.empty());
}

TEST_CASE("a tick that counts fewer requests than one per linger says they are sparse") {
    // One request in a 20 ms tick (steady_interval) may have a gap longer
    // than the 3 ms linger on either side: the daemon keeps sample_interval
    // (5 ms), whose ticks see the gap and release the queue in it.
    for (const auto linger : {3ms, 30ms}) {
        CAPTURE(linger.count());
        Config config = default_config();
        config.defaults.linger = linger;
        config.defaults.linger_auto = false;
        Governor g(machine(), config, declared_costs(machine()));
        g.observe(sample(0, 0, 0, 0), t0);
        g.observe(sample(100, 0, 100, 10), t0 + 5ms); // 100 in 5 ms
        REQUIRE(g.any_active());
        CHECK_FALSE(g.sparse_requests());
        g.observe(sample(110, 0, 110, 11), t0 + 25ms); // 10 in 20 ms, one per 2 ms
        CHECK_FALSE(g.sparse_requests());
        g.observe(sample(111, 0, 111, 11), t0 + 45ms); // one in 20 ms
        CHECK(g.any_active());
        // A 30 ms linger holds through any gap a 20 ms tick may hide.
        CHECK(g.sparse_requests() == (linger == 3ms));
        // One in a 5 ms tick, a little longer or shorter than 5 ms, is
        // sparse all the same; two are not.
        g.observe(sample(112, 0, 112, 11), t0 + 50ms - 20us);
        CHECK(g.sparse_requests() == (linger == 3ms));
        g.observe(sample(114, 0, 114, 11), t0 + 55ms);
        CHECK_FALSE(g.sparse_requests());
        // Still in flight at the sample: no tick releases the queue then.
        g.observe(sample(115, 0, 115, 11, 1), t0 + 75ms);
        CHECK(g.any_active());
        CHECK_FALSE(g.sparse_requests());
    }
    // Nothing active is sparse.
    Governor g(machine(), default_config(), declared_costs(machine()));
    g.observe(sample(0, 0, 0, 0), t0);
    g.observe(sample(0, 0, 0, 0), t0 + 20ms);
    CHECK_FALSE(g.any_active());
    CHECK_FALSE(g.sparse_requests());
}

TEST_CASE("statistics opened late are a new baseline for their device, not its IO") {
    // IRQ 10 (queue 0) and IRQ 11 (queue 1) stand still throughout.
    for (const bool rebased : {false, true}) {
        CAPTURE(rebased);
        Governor g(machine(), default_config(), declared_costs(machine()));
        g.observe(sample(0, 0, 0, 0), t0); // nvme0n1 left out: its slot reads zero
        const IoSample opened = sample(0, 0, 90000, 9000, 1); // its counts since boot
        if (rebased)
            g.rebase_stats(opened, std::vector<std::size_t>{0});
        g.observe(opened, t0 + 5ms);
        // Its first sample is no tick's IO: no latency.
        CHECK(g.devices()[0].latency.mean_us().has_value() == !rebased);
        g.observe(sample(0, 0, 90100, 9010, 0), t0 + 10ms);
        if (rebased) { // from there on its IO counts as usual: 100 in 10 ms
            REQUIRE(g.devices()[0].latency.mean_us());
            CHECK(*g.devices()[0].latency.mean_us() == doctest::Approx(100.0));
        }
    }
}

TEST_CASE("another queue's IO in flight keeps an active queue only within in_flight_bound") {
    Governor g(machine(), default_config(), declared_costs(machine()));
    g.observe(sample(0, 0, 0, 0), t0);
    g.observe(sample(100, 0, 100, 10), t0 + 5ms); // a burst on queue 0 (CPU 0)
    REQUIRE(g.holds().percpu.count(0));
    // Queue 0 completes nothing more; a long request stays in flight on the
    // device, on queue 1, whose interrupt has not come either.
    TimePoint at = t0 + 5ms;
    for (; at < t0 + 5ms + in_flight_bound; at += 10ms) {
        g.observe(sample(100, 0, 100, 10, 1), at);
        CHECK(g.holds().percpu.count(0));
    }
    // Then past the bound and the linger, with the device still busy.
    for (int i = 0; i < 2; ++i, at += 5ms)
        g.observe(sample(100, 0, 100, 10, 1), at);
    CHECK(g.holds().percpu.empty());
}

TEST_CASE("in_flight_bound runs from a queue's activation too, not only its last completion") {
    Governor g(machine(), default_config(), declared_costs(machine()));
    g.observe(sample(0, 0, 0, 0), t0);
    g.observe(sample(0, 5, 5, 1), t0 + 5ms); // queue 1 completed IO long ago
    g.observe(sample(0, 5, 5, 1), t0 + 10ms);
    REQUIRE(g.holds().percpu.empty());
    // A request activates it a second later, and is still in flight at the
    // next sample: no completion of its own yet, but its activation is new.
    REQUIRE(g.on_request_issued(259u << 20, 1, t0 + 1s));
    g.observe(sample(0, 5, 5, 1, 1), t0 + 1s + 20ms);
    CHECK(g.holds().percpu.count(1));
}

TEST_CASE("where per-queue counts are read, only this queue's requests in flight keep it") {
    Governor g(machine(), default_config(), declared_costs(machine()));
    g.observe(sample(0, 0, 0, 0), t0);
    g.observe(sample(100, 0, 100, 10), t0 + 5ms);
    REQUIRE(g.holds().percpu.count(0));
    IoSample other_busy = sample(100, 0, 100, 10, 1);
    other_busy.queue_busy = {0, 1}; // the device's request is on queue 1
    g.observe(other_busy, t0 + 10ms);
    Holds h = g.holds();
    CHECK_FALSE(h.percpu.count(0)); // linger over, nothing of queue 0 in flight
    CHECK(h.percpu.count(1));
}

TEST_CASE("after a span that could not be sampled, what the counters gained activates nothing") {
    Governor g(machine(), default_config(), declared_costs(machine()));
    g.observe(sample(0, 0, 0, 0), t0);
    CHECK_FALSE(g.any_active());
    // Unseen: 500 completions on queue 1 while nothing could be sampled.
    g.rebase(sample(0, 500, 500, 50), t0 + 2s);
    CHECK_FALSE(g.any_active());
    g.observe(sample(0, 500, 500, 50), t0 + 2s + 50ms);
    CHECK_FALSE(g.any_active());
    CHECK(g.holds().percpu.empty());
    // IO after it is seen as usual.
    CHECK(g.observe(sample(0, 505, 505, 51), t0 + 2s + 55ms));
    CHECK(g.holds().percpu.count(1));
}

TEST_CASE("a request event activates the queue its CPU submits to, before any sample") {
    Governor g(machine(), default_config(), declared_costs(machine()));
    g.observe(sample(0, 0, 0, 0), t0);
    CHECK_FALSE(g.on_request_issued(7u << 20, 1, t0 + 1ms)); // another device
    CHECK(g.on_request_issued(259u << 20, 1, t0 + 1ms));
    Holds h = g.holds();
    REQUIRE(h.percpu.size() == 1);
    // No latency observed yet: the pcie default (80 us) allows 8 us, so C1E stays.
    CHECK(h.percpu.at(1).limit == LatencyLimit{4});
    CHECK_FALSE(g.on_request_issued(259u << 20, 1, t0 + 2ms)); // already active
}

TEST_CASE("the global backend holds the strictest active limit once, for all CPUs") {
    Config config = default_config();
    config.defaults.backend = Backend::global;
    config.defaults.mode = Mode::fixed;
    config.defaults.limit_us = 20;
    Governor g(machine(), config, declared_costs(machine()));
    g.observe(sample(0, 0, 0, 0), t0);
    g.observe(sample(3, 3, 6, 1), t0 + 5ms);
    Holds h = g.holds();
    CHECK(h.percpu.empty());
    CHECK(h.global == LatencyLimit{20});
    CHECK(h.global_for == std::vector<QueueKey>{{"nvme0n1", 0}, {"nvme0n1", 1}});
}

TEST_CASE("a multipath path disk is sampled through its own statistics, not its head's") {
    Topology t = machine();
    t.devices[0].name = "nvme1c1n1";
    t.devices[0].dev = "";
    t.devices[0].hidden = true;
    t.devices[0].multipath_head = "nvme1n1";
    Governor g(t, default_config(), declared_costs(t));
    // The head keeps none before Linux 6.2 (nor later without queue/iostats).
    CHECK(g.stat_sources() == std::vector<std::string>{"nvme1c1n1"});
    // Its dev_t is not in sysfs: requests of the disks sysfs does not show
    // wake the daemon (loop0's do not), and one of an unknown disk goes to
    // the path disk's queue for that CPU.
    CHECK(g.watched_devs() == WatchedDevs{{}, true, {7u << 20}});
    g.observe(sample(0, 0, 0, 0), t0);
    CHECK_FALSE(g.on_request_issued(7u << 20, 1, t0 + 1ms)); // loop0: a disk we know
    CHECK(g.on_request_issued(259u << 20, 1, t0 + 1ms));     // the hidden path's real dev_t
    CHECK(g.holds().percpu.count(1) == 1);
}

TEST_CASE("a queue with requests in flight on it stays active without completions") {
    Governor g(machine(), default_config(), declared_costs(machine()));
    REQUIRE(g.queue_tags().size() == 2);
    CHECK(g.queue_tags()[1].disk == "nvme0n1");
    CHECK(g.queue_tags()[1].hctx == 1);
    g.observe(sample(0, 0, 0, 0), t0);
    IoSample busy = sample(0, 0, 0, 0);
    busy.queue_busy = {0, 1}; // one request on queue 1, none completed yet
    g.observe(busy, t0 + 5ms);
    Holds h = g.holds();
    REQUIRE(h.percpu.size() == 1);
    CHECK(h.percpu.count(1) == 1);
    g.observe(busy, t0 + 100ms);
    CHECK(g.holds().percpu.count(1) == 1);
}

namespace {

// One isolated request on queue 1 at `at`: the event activates the queue,
// the sample 5 ms later sees its one completion, the next one releases it.
// Returns the IRQ 11 count after it.
std::uint64_t isolated_read(Governor& g, TimePoint at, std::uint64_t irq11, int cpu = 1) {
    CHECK(g.on_request_issued(259u << 20, cpu, at, std::nullopt, at));
    ++irq11;
    g.observe(sample(0, irq11, irq11, irq11), at + 5ms, false);
    g.observe(sample(0, irq11, irq11, irq11), at + 10ms, false);
    CHECK_FALSE(g.any_active());
    return irq11;
}

// From idle, isolated reads on queue 1 from CPU 1, 20 ms apart, each one
// more lonely onset, until the eighth starts the pause. Returns the last
// one's time; `irq11` counts their completions.
TimePoint eight_lonely_onsets(Governor& g, std::uint64_t& irq11) {
    g.observe(sample(0, 0, 0, 0), t0);
    TimePoint at = t0;
    for (int i = 0; i < Governor::isolated_after; ++i) {
        CHECK_FALSE(g.isolated_requests());
        at += 20ms;
        irq11 = isolated_read(g, at, irq11);
        CHECK(g.lonely_onsets() == i + 1);
    }
    CHECK(g.isolated_requests());
    return at;
}

} // namespace

TEST_CASE("isolated requests: eight onsets in a row that came alone stop the wake-ups") {
    Governor g(machine(), default_config(), declared_costs(machine()));
    std::uint64_t irq11 = 0;
    TimePoint at = eight_lonely_onsets(g, irq11);

    // Sampled every 50 ms from here: two requests in 50 ms are still
    // isolated and activate nothing, so nothing is held for them.
    irq11 += 2;
    CHECK_FALSE(g.observe(sample(0, irq11, irq11, irq11), at + 60ms, false));
    CHECK_FALSE(g.any_active());
    CHECK(g.isolated_requests());
    // Nor does one request in a sample 5 ms after the last: one is no stream.
    irq11 += 1;
    CHECK_FALSE(g.observe(sample(0, irq11, irq11, irq11), at + 65ms, false));
    CHECK_FALSE(g.any_active());
    CHECK(g.isolated_requests());
    // Nor two in the next 5 ms, close together: a pair is no stream either.
    irq11 += 2;
    CHECK_FALSE(g.observe(sample(0, irq11, irq11, irq11), at + 70ms, false));
    CHECK_FALSE(g.any_active());
    CHECK(g.isolated_requests());
    CHECK(g.lonely_onsets() == Governor::isolated_after);

    // Three in the next 5 ms: less than 10 ms apart, a stream. It is held,
    // and the daemon wakes on requests again.
    irq11 += 3;
    CHECK(g.observe(sample(0, irq11, irq11, irq11), at + 75ms, false));
    CHECK(g.any_active());
    CHECK(g.holds().percpu.count(1));
    CHECK_FALSE(g.isolated_requests());
    CHECK(g.lonely_onsets() == 0);
}

TEST_CASE("isolated requests: a CPU that submits to two queues counts each onset once") {
    // A read queue and the default one: the request activates both, and
    // completes on one. The other saw nothing of its own, and counts
    // nothing: the pause begins after eight requests, not four.
    Topology t = machine();
    t.devices[0].queues[0].submit_cpus = {0, 1};
    Governor g(t, default_config(), declared_costs(t));
    std::uint64_t irq11 = 0;
    TimePoint at = eight_lonely_onsets(g, irq11);
    // With company on the queue that completed it, the streak starts
    // again, though the other queue, released with it, saw none.
    at += 20ms;
    REQUIRE(g.on_request_issued(259u << 20, 1, at, std::nullopt, at));
    irq11 += 2;
    g.observe(sample(0, irq11, irq11, irq11), at + 2ms, false);
    g.observe(sample(0, irq11, irq11, irq11), at + 7ms, false);
    CHECK_FALSE(g.any_active());
    CHECK(g.lonely_onsets() == 0);
}

TEST_CASE("isolated requests: an onset followed by a second request breaks the streak") {
    Governor g(machine(), default_config(), declared_costs(machine()));
    g.observe(sample(0, 0, 0, 0), t0);
    std::uint64_t irq11 = 0;
    TimePoint at = t0;
    for (int i = 0; i < Governor::isolated_after - 1; ++i) {
        at += 20ms;
        irq11 = isolated_read(g, at, irq11);
    }
    CHECK(g.lonely_onsets() == Governor::isolated_after - 1);
    // The next onset has company: two completions by the first sample.
    at += 20ms;
    CHECK(g.on_request_issued(259u << 20, 1, at));
    irq11 += 2;
    g.observe(sample(0, irq11, irq11, irq11), at + 5ms, false);
    CHECK(g.any_active());
    g.observe(sample(0, irq11, irq11, irq11), at + 10ms, false);
    CHECK_FALSE(g.any_active());
    CHECK(g.lonely_onsets() == 0);
    CHECK_FALSE(g.isolated_requests());
}

TEST_CASE("isolated requests: the onset's own completion does not keep its queue active") {
    Governor g(machine(), default_config(), declared_costs(machine()));
    g.observe(sample(0, 0, 0, 0), t0);
    CHECK(g.on_request_issued(259u << 20, 1, t0 + 1ms));
    // The first sample sees the onset request's interrupt: not new IO, so
    // the queue is released once the linger (3 ms) from the onset is over.
    CHECK(g.observe(sample(0, 1, 1, 1), t0 + 6ms, false));
    CHECK_FALSE(g.any_active());
    CHECK(g.lonely_onsets() == 1);
}

TEST_CASE("isolated requests: an onset request still in flight at the first sample came alone") {
    Governor g(machine(), default_config(), declared_costs(machine()));
    g.observe(sample(0, 0, 0, 0), t0);
    CHECK(g.on_request_issued(259u << 20, 1, t0 + 1ms));
    // The first sample sees it in flight on queue 1, the next one its
    // completion: both are the onset request itself, no company.
    IoSample busy = sample(0, 0, 0, 0, 1);
    busy.queue_busy = {0, 1};
    g.observe(busy, t0 + 2ms, false);
    CHECK(g.any_active());
    g.observe(sample(0, 1, 1, 1), t0 + 4ms, false);
    g.observe(sample(0, 1, 1, 1), t0 + 10ms, false);
    CHECK_FALSE(g.any_active());
    CHECK(g.lonely_onsets() == 1);

    // A second request in flight once the onset's has completed is company.
    CHECK(g.on_request_issued(259u << 20, 1, t0 + 100ms));
    g.observe(sample(0, 2, 2, 2), t0 + 101ms, false);
    busy = sample(0, 2, 2, 2, 1);
    busy.queue_busy = {0, 1};
    g.observe(busy, t0 + 102ms, false);
    g.observe(sample(0, 3, 3, 3), t0 + 103ms, false);
    g.observe(sample(0, 3, 3, 3), t0 + 110ms, false);
    CHECK_FALSE(g.any_active());
    CHECK(g.lonely_onsets() == 0);
}

TEST_CASE("isolated requests: the sample that counts the onset's completion may see its tag") {
    Governor g(machine(), default_config(), declared_costs(machine()));
    g.observe(sample(0, 0, 0, 0), t0);
    std::uint64_t irq11 = 0;
    TimePoint at = t0;
    // A completion count and the in-flight state are not read at one
    // instant: a sample may see the onset request completed and still in
    // flight. It came alone all the same, each of the eight times.
    for (int i = 0; i < Governor::isolated_after; ++i) {
        at += 20ms;
        CHECK(g.on_request_issued(259u << 20, 1, at, std::nullopt, at));
        ++irq11;
        IoSample completing = sample(0, irq11, irq11, irq11, 1);
        completing.queue_busy = {0, 1};
        g.observe(completing, at + 1ms, false);
        g.observe(sample(0, irq11, irq11, irq11), at + 5ms, false);
        g.observe(sample(0, irq11, irq11, irq11), at + 10ms, false);
        CHECK_FALSE(g.any_active());
        CHECK(g.lonely_onsets() == i + 1);
    }
    CHECK(g.isolated_requests());
}

TEST_CASE("isolated requests: an onset whose completion fell in a blind span is not lonely") {
    Governor g(machine(), default_config(), declared_costs(machine()));
    g.observe(sample(0, 0, 0, 0), t0);
    std::uint64_t irq11 = 0;
    TimePoint at = t0;
    for (int i = 0; i < 3; ++i)
        irq11 = isolated_read(g, at += 20ms, irq11);
    REQUIRE(g.lonely_onsets() == 3);
    at += 20ms;
    CHECK(g.on_request_issued(259u << 20, 1, at));
    // The samples failed meanwhile: the onset request's completion is in
    // the counts the rebase drops.
    g.rebase(sample(0, irq11 + 1, irq11 + 1, irq11 + 1), at + 1ms);
    CHECK(g.any_active());
    SUBCASE("a completion after it is another request's: company, the streak starts again") {
        // Not taken for the onset's; whether that one had company is not
        // known.
        irq11 += 2;
        g.observe(sample(0, irq11, irq11, irq11), at + 2ms, false);
        g.observe(sample(0, irq11, irq11, irq11), at + 10ms, false);
        CHECK_FALSE(g.any_active());
        CHECK(g.lonely_onsets() == 0);
    }
    SUBCASE("none after it: it counts for nothing, the streak stays") {
        irq11 += 1;
        g.observe(sample(0, irq11, irq11, irq11), at + 10ms, false);
        CHECK_FALSE(g.any_active());
        CHECK(g.lonely_onsets() == 3);
    }
}

TEST_CASE("isolated requests: a stat file reopened leaves the onset of a queue with its own IRQ") {
    Governor g(machine(), default_config(), declared_costs(machine()));
    g.observe(sample(0, 0, 0, 0), t0);
    CHECK(g.on_request_issued(259u << 20, 1, t0 + 1ms));
    // The device's statistics were left out until now: its queues count
    // their own interrupts, which were read all along.
    const std::size_t slot = 0;
    g.rebase_stats(sample(0, 0, 5, 5), std::span(&slot, 1));
    g.observe(sample(0, 1, 6, 6), t0 + 3ms, false); // the onset's own completion
    g.observe(sample(0, 1, 6, 6), t0 + 10ms, false);
    CHECK_FALSE(g.any_active());
    CHECK(g.lonely_onsets() == 1);
}

TEST_CASE(
    "isolated requests: a tag still in use one sample after the onset's completion is company") {
    Governor g(machine(), default_config(), declared_costs(machine()));
    g.observe(sample(0, 0, 0, 0), t0);
    CHECK(g.on_request_issued(259u << 20, 1, t0 + 1ms, std::nullopt, t0 + 1ms));
    IoSample completing = sample(0, 1, 1, 1, 1);
    completing.queue_busy = {0, 1};
    g.observe(completing, t0 + 2ms, false);
    g.observe(completing, t0 + 3ms, false); // no new completion, one in flight
    g.observe(sample(0, 2, 2, 2), t0 + 4ms, false);
    g.observe(sample(0, 2, 2, 2), t0 + 10ms, false);
    CHECK_FALSE(g.any_active());
    CHECK(g.lonely_onsets() == 0);
}

namespace {

// What latgovd reads right after an onset on queue 1 has its holds: the
// device's stat (`in_flight` requests in flight, `ios` completed), then
// IRQ 11's count.
void onset_baseline(Governor& g, std::uint64_t irq11, std::uint64_t ios, std::uint64_t in_flight) {
    const auto due = g.onset_baselines_due();
    REQUIRE(due.size() == 1);
    CHECK(due[0].device == 0);
    CHECK(due[0].irqs == std::vector<int>{11});
    BlockStat stat;
    stat.read_ios = ios;
    stat.in_flight = in_flight;
    g.take_onset_baseline(0, stat, {{11, irq11}});
    CHECK(g.onset_baselines_due().empty()); // once per onset
}

// The two ticks after an onset at `at`, 5 and 10 ms on, both reading `s`:
// the first counts what came since the baseline, the second releases.
void two_ticks_after(Governor& g, const IoSample& s, TimePoint at) {
    g.observe(s, at + 5ms, false);
    g.observe(s, at + 10ms, false);
    CHECK_FALSE(g.any_active());
}

} // namespace

TEST_CASE("isolated requests: IO that wakes nobody, completed before an onset, is no company") {
    // Writeback between isolated reads: requests the events leave out, but
    // the interrupt counts count, in the idle span before each onset. The
    // linger is fixed: under "auto" the writes shorten the gaps learnt
    // from the device's completions, and the linger that follows holds
    // from one read to the next.
    Config config = default_config();
    config.defaults.linger = 3ms;
    config.defaults.linger_auto = false;
    Governor g(machine(), config, declared_costs(machine()));
    g.observe(sample(0, 0, 0, 0), t0);
    bool baseline = true;
    SUBCASE("counted from the onset's baseline, each read came alone: the wake-ups stop") {}
    SUBCASE("without a baseline (none could be read) they pass for company, as they did") {
        baseline = false;
    }
    std::uint64_t irq11 = 0;
    TimePoint at = t0;
    for (int i = 0; i < Governor::isolated_after; ++i) {
        at += 20ms;
        irq11 += 2; // two writes, no event
        CHECK(g.on_request_issued(259u << 20, 1, at, std::nullopt, at));
        if (baseline)
            onset_baseline(g, irq11, irq11, 1); // the read in flight
        ++irq11;
        g.observe(sample(0, irq11, irq11, irq11), at + 5ms, false);
        g.observe(sample(0, irq11, irq11, irq11), at + 10ms, false);
        CHECK_FALSE(g.any_active());
        CHECK(g.lonely_onsets() == (baseline ? i + 1 : 0));
    }
    CHECK(g.isolated_requests() == baseline);
}

TEST_CASE("isolated requests: after an onset's baseline, completions besides its own are company") {
    Governor g(machine(), default_config(), declared_costs(machine()));
    g.observe(sample(0, 0, 0, 0), t0);
    const std::uint64_t irq11 = isolated_read(g, t0 + 20ms, 0);
    REQUIRE(g.lonely_onsets() == 1);
    const TimePoint at = t0 + 40ms;
    REQUIRE(g.on_request_issued(259u << 20, 1, at, std::nullopt, at));
    // What completed by the first sample, since the baseline.
    auto first_sample = [&](std::uint64_t after_base) {
        const std::uint64_t n = irq11 + 5 + after_base; // 5 of writeback before
        two_ticks_after(g, sample(0, n, n, n), at);
    };
    SUBCASE("its request in flight at the baseline, one completion after: its own, alone") {
        onset_baseline(g, irq11 + 5, irq11 + 5, 1);
        first_sample(1);
        CHECK(g.lonely_onsets() == 2);
    }
    SUBCASE("its request in flight at the baseline, two completions after: company") {
        onset_baseline(g, irq11 + 5, irq11 + 5, 1);
        first_sample(2);
        CHECK(g.lonely_onsets() == 0);
    }
    SUBCASE("nothing in flight at the baseline: its own completed before, and is in it") {
        // In the baseline, then: none after is a request alone, one is company.
        onset_baseline(g, irq11 + 6, irq11 + 6, 0);
        SUBCASE("none after") {
            first_sample(1);
            CHECK(g.lonely_onsets() == 2);
        }
        SUBCASE("one after") {
            first_sample(2);
            CHECK(g.lonely_onsets() == 0);
        }
    }
}

TEST_CASE("isolated requests: where the onset CPU's issue count is read it tells company") {
    // Writeback completes on the read's queue while the read is held. The
    // onset CPU's count of requests someone waits for (reads and
    // synchronous writes) says whether another came: other CPUs' would
    // fire their events.
    Governor g(machine(), default_config(), declared_costs(machine()));
    g.observe(sample(0, 0, 0, 0), t0);
    const TimePoint at = t0 + 20ms;
    REQUIRE(g.on_request_issued(259u << 20, 1, at, std::nullopt, at));
    const auto due = g.onset_baselines_due();
    REQUIRE(due.size() == 1);
    CHECK(due[0].onset_cpus == CpuSet{1});
    CHECK(due[0].submit_cpus == CpuSet{1});
    BlockStat stat;
    stat.in_flight = 1;
    g.take_onset_baseline(0, stat, {{11, 0}}, {{1, 7}}); // CPU 1's 7th: the read
    // The read and two writes completed on IRQ 11 by the first sample.
    auto first_samples = [&](std::uint64_t cpu1_issues) {
        IoSample s = sample(0, 3, 3, 3);
        s.cpu_issues = {issues_unread, cpu1_issues};
        two_ticks_after(g, s, at);
    };
    SUBCASE("nothing more issued from CPU 1: the writes are no company") {
        first_samples(7);
        CHECK(g.lonely_onsets() == 1);
    }
    SUBCASE("another request issued from CPU 1: company") {
        first_samples(8);
        CHECK(g.lonely_onsets() == 0);
    }
    SUBCASE("CPU 1's count not read: the completions tell as without it") {
        first_samples(issues_unread);
        CHECK(g.lonely_onsets() == 0);
    }
}

TEST_CASE("isolated requests: a submit CPU whose event is disarmed is counted too") {
    // Queue 1 takes CPU 0's requests too. CPU 0's event fired earlier
    // (for another queue while something stayed active) and is disarmed:
    // a request of it fires nothing, and its count tells instead.
    Topology t = machine();
    t.devices[0].queues[0].submit_cpus = {};
    t.devices[0].queues[1].submit_cpus = {0, 1};
    Governor g(t, loop_governed(), declared_costs(t));
    IoSample idle = sample(0, 0, 0, 0);
    idle.devices.push_back(BlockStat{});
    g.observe(idle, t0);
    const TimePoint at = t0 + 20ms;
    REQUIRE(g.on_request_issued(259u << 20, 1, at, std::nullopt, at));
    const auto due = g.onset_baselines_due();
    REQUIRE(due.size() == 1);
    CHECK(due[0].onset_cpus == CpuSet{1});
    CHECK(due[0].submit_cpus == CpuSet{0, 1});
    BlockStat stat;
    stat.in_flight = 1;
    auto first_samples = [&](std::uint64_t cpu0_issues) {
        IoSample s = sample(0, 3, 3, 3);
        s.devices.push_back(BlockStat{});
        s.cpu_issues = {cpu0_issues, 7};
        two_ticks_after(g, s, at);
    };
    SUBCASE("CPU 0 counted at the onset, nothing issued since: alone") {
        g.take_onset_baseline(0, stat, {{11, 0}}, {{0, 3}, {1, 7}});
        first_samples(3);
        CHECK(g.lonely_onsets() == 1);
    }
    SUBCASE("CPU 0 counted at the onset, a request issued since: company") {
        g.take_onset_baseline(0, stat, {{11, 0}}, {{0, 3}, {1, 7}});
        first_samples(4);
        CHECK(g.lonely_onsets() == 0);
    }
    SUBCASE("CPU 0 armed at the onset, then its event fired") {
        // For a write nobody waits for (a kernel that would not filter on
        // rwbs): disarmed from there with no count, so the completions
        // tell, the writes' included.
        g.take_onset_baseline(0, stat, {{11, 0}}, {{1, 7}});
        CHECK_FALSE(g.on_request_issued(259u << 20, 0, at + 1ms, false, at + 1ms));
        first_samples(issues_unread);
        CHECK(g.lonely_onsets() == 0);
    }
    SUBCASE("CPU 0 armed at the onset and silent: its events would tell") {
        g.take_onset_baseline(0, stat, {{11, 0}}, {{1, 7}});
        first_samples(issues_unread);
        CHECK(g.lonely_onsets() == 1);
    }
}

TEST_CASE("an onset's issue counts are due only where the device holds waiter CPUs") {
    Config config = default_config();
    config.defaults.waiter_cpus = false;
    Governor g(machine(), config, declared_costs(machine()));
    g.observe(sample(0, 0, 0, 0), t0);
    REQUIRE(g.on_request_issued(259u << 20, 1, t0 + 1ms));
    const auto due = g.onset_baselines_due();
    REQUIRE(due.size() == 1);
    CHECK(due[0].irqs == std::vector<int>{11});
    CHECK(due[0].onset_cpus.empty()); // their counters are not read every tick
    CHECK(due[0].submit_cpus.empty());
}

TEST_CASE("isolated requests: a second request's event while its queue is active is company") {
    Governor g(machine(), default_config(), declared_costs(machine()));
    g.observe(sample(0, 0, 0, 0), t0);
    REQUIRE(g.on_request_issued(259u << 20, 1, t0 + 1ms));
    onset_baseline(g, 0, 0, 1);
    SUBCASE("another request fired an event: company, though its completion is not counted yet") {
        CHECK_FALSE(g.on_request_issued(259u << 20, 1, t0 + 2ms)); // activates nothing
        g.observe(sample(0, 1, 1, 1), t0 + 3ms, false);
        g.observe(sample(0, 1, 1, 1), t0 + 10ms, false);
        CHECK_FALSE(g.any_active());
        CHECK(g.lonely_onsets() == 0);
    }
    auto came_alone = [&] {
        g.observe(sample(0, 1, 1, 1), t0 + 3ms, false);
        g.observe(sample(0, 1, 1, 1), t0 + 10ms, false);
        CHECK_FALSE(g.any_active());
        CHECK(g.lonely_onsets() == 1);
    };
    SUBCASE("none did: the one completion is the onset's own") {
        came_alone();
    }
    SUBCASE("only an asynchronous write's did: no company by itself") {
        // Nobody waits for it (its completion, not counted here, would be).
        CHECK_FALSE(g.on_request_issued(259u << 20, 1, t0 + 2ms, false));
        came_alone();
    }
}

TEST_CASE("isolated requests: an asynchronous write after idle starts nothing") {
    Governor g(machine(), default_config(), declared_costs(machine()));
    g.observe(sample(0, 0, 0, 0), t0);
    CHECK_FALSE(g.on_request_issued(259u << 20, 1, t0 + 1ms, false));
    CHECK_FALSE(g.any_active());
    CHECK(g.onset_baselines_due().empty());
    CHECK(g.holds().percpu.empty());
}

TEST_CASE("an onset's baseline is due for request events' onsets alone, and read once") {
    Governor g(machine(), loop_governed(), declared_costs(machine()));
    REQUIRE(g.devices().size() == 2);
    IoSample idle = sample(0, 0, 0, 0);
    idle.devices.push_back(BlockStat{});
    g.observe(idle, t0);
    CHECK(g.onset_baselines_due().empty());
    // loop0 has no IRQ: its baseline is its stat's completions alone.
    REQUIRE(g.on_request_issued(7u << 20, 0, t0 + 1ms));
    auto due = g.onset_baselines_due();
    REQUIRE(due.size() == 1);
    CHECK(due[0].device == 1);
    CHECK(due[0].irqs.empty());
    BlockStat base;
    base.write_ios = 40; // writeback before the onset
    base.in_flight = 1;
    g.take_onset_baseline(1, base, {});
    CHECK(g.onset_baselines_due().empty());
    // A queue whose IRQ count could not be read takes none, and is due no
    // more: one read later would drop what came between.
    REQUIRE(g.on_request_issued(259u << 20, 1, t0 + 1ms));
    REQUIRE(g.onset_baselines_due().size() == 1);
    g.take_onset_baseline(0, BlockStat{}, {});
    CHECK(g.onset_baselines_due().empty());
    // The loop's read completes alone: 41 completions, 40 of them before it.
    IoSample done = sample(0, 1, 1, 1);
    BlockStat loop_done = base;
    loop_done.read_ios = 1;
    loop_done.in_flight = 0;
    done.devices.push_back(loop_done);
    g.observe(done, t0 + 5ms, false);
    g.observe(done, t0 + 10ms, false);
    CHECK_FALSE(g.any_active());
    // Each came alone: loop0's counted from its baseline, nvme0n1's from
    // the sample before it, with nothing between.
    CHECK(g.lonely_onsets() == 2);
}

TEST_CASE("an onset's baseline not read by its first sample is not read after it") {
    Governor g(machine(), default_config(), declared_costs(machine()));
    g.observe(sample(0, 0, 0, 0), t0);
    REQUIRE(g.on_request_issued(259u << 20, 1, t0 + 1ms));
    REQUIRE(g.onset_baselines_due().size() == 1);
    // The first sample finds the onset's request in flight, no baseline
    // read: a wake-up for another request must not read one now, which
    // would drop the company completed since that sample.
    g.observe(sample(0, 0, 0, 0, 1), t0 + 2ms, false);
    CHECK(g.any_active());
    CHECK(g.onset_baselines_due().empty());
}

TEST_CASE("isolated requests: one request activating two queues is one lonely onset") {
    // CPU 1 submits to queue 0 (IRQ 10) and queue 1 (IRQ 11); its read
    // completes on queue 1 before the baseline, while writes completed on
    // queue 0 before the onset. Nothing is in flight at the baseline, so
    // each queue finds a completion of its own before it: the read still
    // counts once.
    Topology t = machine();
    t.devices[0].queues[0].submit_cpus = {0, 1};
    Governor g(t, default_config(), declared_costs(t));
    g.observe(sample(0, 0, 0, 0), t0);
    REQUIRE(g.on_request_issued(259u << 20, 1, t0 + 20ms));
    const auto due = g.onset_baselines_due();
    REQUIRE(due.size() == 1);
    CHECK(due[0].irqs == std::vector<int>{10, 11});
    BlockStat stat;
    stat.read_ios = 1;
    stat.write_ios = 2;
    g.take_onset_baseline(0, stat, {{10, 2}, {11, 1}});
    g.observe(sample(2, 1, 3, 3), t0 + 22ms, false);
    g.observe(sample(2, 1, 3, 3), t0 + 30ms, false);
    CHECK_FALSE(g.any_active());
    CHECK(g.lonely_onsets() == 1);
}

namespace {

// machine() with queue 1 (IRQ 11, completes on CPU 1) taking the requests
// of CPU 0 too: a submitter on CPU 0 waits there for a completion on CPU 1.
Topology shared_queue_machine() {
    Topology t = machine();
    t.devices[0].queues[0].submit_cpus = {};
    t.devices[0].queues[1].submit_cpus = {0, 1};
    return t;
}

constexpr std::uint32_t nvme0n1 = 259u << 20;

// Eight lonely reads from CPU 0, 20 ms apart from t0 + 20 ms: each an
// onset timed by its event, released 10 ms later. Returns the last one's
// time; `irq11` counts their completions.
TimePoint eight_periodic_reads(Governor& g, std::uint64_t& irq11) {
    TimePoint at = t0;
    for (int i = 0; i < Governor::isolated_after; ++i) {
        at += 20ms;
        irq11 = isolated_read(g, at, irq11, 0);
    }
    return at;
}

// From idle, eight periodic reads; the last one's time.
TimePoint isolated_from_idle(Governor& g) {
    g.observe(sample(0, 0, 0, 0), t0);
    std::uint64_t irq11 = 0;
    return eight_periodic_reads(g, irq11);
}

// From idle, eight periodic reads, then the window ahead of the ninth,
// opened: it holds the completion CPU. Returns the last read's time.
TimePoint open_first_window(Governor& g) {
    const TimePoint last = isolated_from_idle(g);
    REQUIRE(g.isolated_requests());
    const auto opens = g.window_opens(last + 11ms);
    REQUIRE(opens);
    REQUIRE(g.prearm(*opens));
    CHECK(g.holds().percpu.count(1));
    return last;
}

// The first window opened, and two reads in it 300 us apart from when the
// ninth was due. Returns that time.
TimePoint pair_in_first_window(Governor& g) {
    const TimePoint expected = open_first_window(g) + 20ms;
    g.on_recorded_request(nvme0n1, 0, expected);
    g.on_recorded_request(nvme0n1, 0, expected + 300us);
    return expected;
}

// From idle, eight periodic reads: isolated, and yet no period is learnt
// and no window opens.
void check_no_window(Governor& g) {
    const TimePoint last = isolated_from_idle(g);
    CHECK(g.isolated_requests());
    CHECK_FALSE(g.periodic().period());
    CHECK_FALSE(g.window_opens(last + 11ms));
    CHECK_FALSE(g.prearm(last + 20ms));
}

} // namespace

TEST_CASE("prearm: isolated requests at a steady period are held for ahead, and released after") {
    Governor g(shared_queue_machine(), default_config(), declared_costs(machine()));
    g.observe(sample(0, 0, 0, 0), t0);
    std::uint64_t irq11 = 0;
    const TimePoint last = eight_periodic_reads(g, irq11);
    REQUIRE(g.isolated_requests());
    REQUIRE(g.periodic().period());
    CHECK(g.periodic().period()->period == 20ms);

    // The next read is due at last + 20 ms: the window opens `lead` before.
    const TimePoint expected = last + 20ms;
    const auto opens = g.window_opens(last + 11ms);
    REQUIRE(opens);
    CHECK(*opens == expected - g.periodic().lead());
    CHECK_FALSE(g.prearm(*opens - 1us));
    CHECK_FALSE(g.any_active());
    REQUIRE(g.prearm(*opens));
    // The completion CPU and the CPU the reads came from, before the read.
    Holds h = g.holds();
    REQUIRE(h.percpu.size() == 2);
    CHECK(h.percpu.at(0).held_for == std::vector<QueueKey>{{"nvme0n1", 1, HoldRole::waits}});
    CHECK(h.percpu.at(1).held_for == std::vector<QueueKey>{{"nvme0n1", 1, HoldRole::completes}});
    CHECK_FALSE(g.window_opens(*opens)); // one window at a time
    const auto closes = g.window_closes();
    REQUIRE(closes);
    CHECK(*closes == expected + g.periodic().grace());

    // The read comes 50 us late and completes; the recorder saw it. At the
    // close it is released at once: it came alone, nothing is in flight.
    g.on_recorded_request(nvme0n1, 0, expected + 50us);
    CHECK(g.periodic().hits() == 1);
    CHECK_FALSE(g.window_closes()); // its request came: nothing left to close
    ++irq11;
    CHECK(g.observe(sample(0, irq11, irq11, irq11), *closes, false));
    CHECK_FALSE(g.any_active());
    CHECK(g.lonely_onsets() == Governor::isolated_after + 1);

    // Two windows in a row without their read: misses, neither an onset
    // nor company, and then the period is forgotten.
    TimePoint now = *closes;
    for (int miss = 1; miss <= PeriodicOnsets::misses_allowed; ++miss) {
        const auto next = g.window_opens(now);
        REQUIRE(next);
        REQUIRE(g.prearm(*next));
        now = *g.window_closes();
        CHECK_FALSE(g.observe(sample(0, irq11, irq11, irq11), now - 1us, false));
        CHECK(g.any_active()); // held through the whole window, past the linger
        CHECK(g.observe(sample(0, irq11, irq11, irq11), now, false));
        CHECK_FALSE(g.any_active());
        CHECK(g.periodic().misses() == static_cast<std::uint64_t>(miss));
    }
    CHECK(g.lonely_onsets() == Governor::isolated_after + 1);
    CHECK(g.isolated_requests());
    CHECK_FALSE(g.periodic().period());
    CHECK_FALSE(g.window_opens(now));
}

TEST_CASE("prearm: a third request in the window is a stream, and ends the isolation") {
    Governor g(shared_queue_machine(), default_config(), declared_costs(machine()));
    const TimePoint expected = pair_in_first_window(g);
    std::uint64_t irq11 = Governor::isolated_after; // the eight reads' completions
    g.on_recorded_request(nvme0n1, 0, expected + 600us);
    irq11 += 3;
    g.observe(sample(0, irq11, irq11, irq11), expected + 1ms, false);
    CHECK(g.any_active()); // not released at once: it lingers as a stream would
    g.observe(sample(0, irq11, irq11, irq11), expected + 6ms, false);
    CHECK_FALSE(g.any_active());
    CHECK(g.lonely_onsets() == 0);
    CHECK_FALSE(g.isolated_requests());
    CHECK_FALSE(g.window_opens(expected + 6ms)); // windows are for isolated requests only
}

TEST_CASE("prearm: a pair in the window is no stream: held for both, and the isolation goes on") {
    Governor g(shared_queue_machine(), default_config(), declared_costs(machine()));
    // A rate-paced job one request behind catches up: two reads together.
    const TimePoint expected = pair_in_first_window(g);
    std::uint64_t irq11 = Governor::isolated_after; // the eight reads' completions
    // The first completed; the second came after this sample's time: held.
    ++irq11;
    CHECK_FALSE(g.observe(sample(0, irq11, irq11, irq11), expected + 200us, false));
    CHECK(g.holds().percpu.count(1));
    // Both completed: held through the linger (3 ms) after, should a third
    // request make it a stream.
    ++irq11;
    CHECK_FALSE(g.observe(sample(0, irq11, irq11, irq11), expected + 1ms, false));
    CHECK(g.holds().percpu.count(1));
    CHECK_FALSE(g.observe(sample(0, irq11, irq11, irq11), expected + 3ms, false));
    CHECK(g.any_active());
    // None came: released, counted neither as a lonely onset nor as a stream.
    CHECK(g.observe(sample(0, irq11, irq11, irq11), expected + 5ms, false));
    CHECK_FALSE(g.any_active());
    CHECK(g.lonely_onsets() == Governor::isolated_after);
    CHECK(g.isolated_requests());
    // The next read is timed by the pair's first, not its second, and held
    // for ahead as before: a lonely one adds to the streak again.
    const auto next = g.window_opens(expected + 5ms);
    REQUIRE(next);
    CHECK(*next == expected + 20ms - g.periodic().lead());
    REQUIRE(g.prearm(*next));
    CHECK(g.holds().percpu.count(1));
    g.on_recorded_request(nvme0n1, 0, expected + 20ms);
    ++irq11;
    CHECK(g.observe(sample(0, irq11, irq11, irq11), expected + 21ms, false));
    CHECK_FALSE(g.any_active());
    CHECK(g.lonely_onsets() == Governor::isolated_after + 1);
}

TEST_CASE("prearm: a third request within the pair's linger is a stream, and ends the isolation") {
    Governor g(shared_queue_machine(), default_config(), declared_costs(machine()));
    const TimePoint expected = pair_in_first_window(g);
    std::uint64_t irq11 = Governor::isolated_after + 2; // the eight reads and the pair
    CHECK_FALSE(g.observe(sample(0, irq11, irq11, irq11), expected + 1ms, false));
    CHECK(g.any_active()); // both completed, and the pair lingers
    // A stream 2 ms apart: its third request comes after the pair completed.
    g.on_recorded_request(nvme0n1, 0, expected + 2300us);
    ++irq11;
    CHECK_FALSE(g.observe(sample(0, irq11, irq11, irq11), expected + 3ms, false));
    CHECK(g.any_active());
    CHECK(g.isolated_requests()); // until its queue is released
    CHECK(g.observe(sample(0, irq11, irq11, irq11), expected + 7ms, false));
    CHECK_FALSE(g.any_active());
    CHECK(g.lonely_onsets() == 0);
    CHECK_FALSE(g.isolated_requests());
}

TEST_CASE("prearm: a request issued after the sample's time is not taken as completed") {
    Governor g(shared_queue_machine(), default_config(), declared_costs(machine()));
    const TimePoint last = open_first_window(g);
    std::uint64_t irq11 = Governor::isolated_after; // the eight reads' completions
    // The tick's time is taken, its sample read (nothing in flight), and
    // only then the recorder drained: the read came in between. The tick
    // comes more than a linger (3 ms) after the window opened.
    const TimePoint tick = last + 25ms;
    g.on_recorded_request(nvme0n1, 0, tick + 40us);
    CHECK_FALSE(g.observe(sample(0, irq11, irq11, irq11), tick, false));
    CHECK(g.any_active());
    CHECK(g.holds().percpu.count(1));
    // The next sample sees it completed: released at once, alone.
    ++irq11;
    CHECK(g.observe(sample(0, irq11, irq11, irq11), tick + 1ms, false));
    CHECK_FALSE(g.any_active());
    CHECK(g.lonely_onsets() == Governor::isolated_after + 1);
}

TEST_CASE("prearm: a span nothing observed during a window leaves its request lonely") {
    // The recorder, not the counters, tells a window's company: what the
    // counters lost says nothing about it, and the isolation goes on.
    Governor g(shared_queue_machine(), default_config(), declared_costs(machine()));
    const TimePoint expected = open_first_window(g) + 20ms;
    g.on_recorded_request(nvme0n1, 0, expected);
    std::uint64_t irq11 = Governor::isolated_after;
    g.rebase(sample(0, irq11, irq11, irq11), expected + 100us);
    // Its completion, counted after the blind span: released at once, as
    // a lonely request, before its linger is over.
    ++irq11;
    CHECK(g.observe(sample(0, irq11, irq11, irq11), expected + 1ms, false));
    CHECK_FALSE(g.any_active());
    CHECK(g.lonely_onsets() == Governor::isolated_after + 1);
    CHECK(g.isolated_requests());
}

TEST_CASE("prearm: a window's request the recorder lost, seen by the sample, is a hit") {
    // A full ring, or a recorder disarmed while the window was open: the
    // request's tag or its completion says it came.
    Governor g(shared_queue_machine(), default_config(), declared_costs(machine()));
    const TimePoint expected = open_first_window(g) + 20ms;
    const auto closes = g.window_closes();
    REQUIRE(closes);
    std::uint64_t irq11 = Governor::isolated_after;
    SUBCASE("in flight on its queue") {
        IoSample busy = sample(0, irq11, irq11, irq11, 1);
        busy.queue_busy = {0, 1};
        g.observe(busy, expected + 100us, false);
        CHECK(g.any_active());
    }
    SUBCASE("completed between two samples in the window") {
        CHECK_FALSE(g.observe(sample(0, irq11, irq11, irq11), expected - 100us, false));
        ++irq11;
    }
    g.observe(sample(0, irq11, irq11, irq11), *closes, false);
    CHECK(g.periodic().hits() == 1);
    CHECK(g.periodic().misses() == 0);
    g.observe(sample(0, irq11, irq11, irq11), *closes + 5ms, false);
    CHECK_FALSE(g.any_active());
    CHECK(g.isolated_requests());
}

TEST_CASE("prearm: a window's request in flight at the close, unrecorded, is held until it "
          "completes") {
    // The recorder did not see it (disarmed, as when another queue's stream
    // ends the isolation while a window is open): the device's count of
    // requests in flight is all that tells of it.
    Governor g(shared_queue_machine(), default_config(), declared_costs(machine()));
    const TimePoint opened = open_first_window(g) + 20ms - g.periodic().lead();
    const auto closes = g.window_closes();
    REQUIRE(closes);
    std::uint64_t irq11 = Governor::isolated_after;
    CHECK_FALSE(g.observe(sample(0, irq11, irq11, irq11, 1), *closes, false));
    CHECK(g.holds().percpu.count(1));
    CHECK(g.periodic().misses() == 0);
    SUBCASE("it completed: a hit, released at the next sample") {
        ++irq11;
        g.observe(sample(0, irq11, irq11, irq11), *closes + 1ms, false);
        CHECK(g.periodic().hits() == 1);
        CHECK(g.periodic().misses() == 0);
        g.observe(sample(0, irq11, irq11, irq11), *closes + 2ms, false);
        CHECK_FALSE(g.any_active());
        CHECK(g.isolated_requests());
    }
    SUBCASE("still in flight 100 ms after the window opened: not its request, a miss") {
        CHECK_FALSE(g.observe(sample(0, irq11, irq11, irq11, 1), opened + 99ms, false));
        CHECK(g.any_active());
        CHECK(g.observe(sample(0, irq11, irq11, irq11, 1), opened + 100ms, false));
        CHECK_FALSE(g.any_active());
        CHECK(g.periodic().hits() == 0);
        CHECK(g.periodic().misses() == 1);
    }
}

TEST_CASE("prearm: a window opened long before its request holds while the request is in "
          "flight") {
    // Reads every 2 s, three in four within 60 ms of it: the window opens
    // 120.5 ms ahead, and the device's count of requests in flight must
    // count from the request, not from the opening.
    Governor g(shared_queue_machine(), default_config(), declared_costs(machine()));
    g.observe(sample(0, 0, 0, 0), t0);
    std::uint64_t irq11 = 0;
    TimePoint at = t0 + 20ms;
    irq11 = isolated_read(g, at, irq11, 0);
    for (const auto interval : {2000ms, 1940ms, 2060ms, 2000ms, 1940ms, 2060ms, 2000ms}) {
        at += interval;
        irq11 = isolated_read(g, at, irq11, 0);
    }
    REQUIRE(g.isolated_requests());
    REQUIRE(g.periodic().period());
    CHECK(g.periodic().lead() == 120500us);
    const TimePoint expected = at + 2000ms;
    const auto opens = g.window_opens(at + 11ms);
    REQUIRE(opens);
    CHECK(*opens == expected - 120500us);
    REQUIRE(g.prearm(*opens));
    g.on_recorded_request(nvme0n1, 0, expected);
    // In flight 1 ms later, 121.5 ms after the window opened: held.
    CHECK_FALSE(g.observe(sample(0, irq11, irq11, irq11, 1), expected + 1ms, false));
    CHECK(g.holds().percpu.count(1));
    // Completed: released at once, alone.
    ++irq11;
    CHECK(g.observe(sample(0, irq11, irq11, irq11), expected + 2ms, false));
    CHECK_FALSE(g.any_active());
    CHECK(g.lonely_onsets() == Governor::isolated_after + 1);
}

TEST_CASE("prearm: a completion the queue does not count on its own interrupt is no hit") {
    // Without an IRQ of its own, a queue counts its device's completions:
    // another queue's, of a request from another CPU, say nothing of the
    // window's.
    Topology t = shared_queue_machine();
    t.devices[0].queues[1].irq.reset();
    t.devices[0].queues[0].submit_cpus = {1};
    Governor g(t, default_config(), declared_costs(t));
    g.observe(sample(0, 0, 0, 0), t0);
    std::uint64_t ios = 0;
    TimePoint at = t0;
    for (int i = 0; i < Governor::isolated_after; ++i) {
        at += 20ms;
        REQUIRE(g.on_request_issued(nvme0n1, 0, at, std::nullopt, at));
        ++ios;
        g.observe(sample(0, 0, ios, ios), at + 5ms, false);
        g.observe(sample(0, 0, ios, ios), at + 10ms, false);
    }
    REQUIRE(g.isolated_requests());
    const auto opens = g.window_opens(at + 11ms);
    REQUIRE(opens);
    REQUIRE(g.prearm(*opens));
    const auto closes = g.window_closes();
    REQUIRE(closes);
    g.observe(sample(0, 0, ios, ios), *opens + 100us, false);
    ++ios; // CPU 1's request on queue 0 (IRQ 10) completed
    g.observe(sample(1, 0, ios, ios), *closes, false);
    CHECK(g.periodic().hits() == 0);
    CHECK(g.periodic().misses() == 1);
}

TEST_CASE("prearm: a completion counted by a sample that began before the window is no hit") {
    // The window opens with no sample: the first one in it may count a
    // request that completed before it, the last window's.
    Governor g(shared_queue_machine(), default_config(), declared_costs(machine()));
    open_first_window(g);
    const auto closes = g.window_closes();
    REQUIRE(closes);
    const std::uint64_t irq11 = Governor::isolated_after + 1;
    g.observe(sample(0, irq11, irq11, irq11), *closes, false);
    CHECK(g.periodic().hits() == 0);
    CHECK(g.periodic().misses() == 1);
    CHECK_FALSE(g.any_active());
}

TEST_CASE("prearm = false learns no period and opens no window") {
    Config config = default_config();
    config.defaults.prearm = false;
    Governor g(shared_queue_machine(), config, declared_costs(machine()));
    CHECK_FALSE(g.learns_periods());
    check_no_window(g);
}

TEST_CASE("prearm: with no cpuidle driver auto holds nothing, so it times no period either") {
    Topology t = shared_queue_machine();
    t.cpuidle_driver = "none";
    for (auto& cpu : t.cpus)
        cpu.idle_states.clear();
    {
        Governor g(t, default_config(), declared_costs(t));
        CHECK_FALSE(g.may_hold(g.devices().front()));
        CHECK_FALSE(g.can_hold()); // latgovd only watches
        CHECK_FALSE(g.learns_periods());
        check_no_window(g);
    }
    // A fixed limit is written whatever the driver: its periods are learnt.
    Config fixed = default_config();
    fixed.defaults.mode = Mode::fixed;
    fixed.defaults.limit_us = 0;
    Governor g(t, fixed, declared_costs(t));
    CHECK(g.may_hold(g.devices().front()));
    CHECK(g.can_hold());
    CHECK(g.learns_periods());
    open_first_window(g);
}

TEST_CASE("waiters are held (and their requests counted) only where a device may hold them") {
    Topology none = shared_queue_machine();
    none.cpuidle_driver = "none";
    for (auto& cpu : none.cpus)
        cpu.idle_states.clear();
    CHECK_FALSE(Governor(none, default_config(), declared_costs(none)).holds_waiters());
    CHECK(Governor(machine(), default_config(), declared_costs(machine())).holds_waiters());
    Config off = default_config();
    off.defaults.waiter_cpus = false;
    Governor g(machine(), off, declared_costs(machine()));
    CHECK(g.can_hold());
    CHECK_FALSE(g.holds_waiters());
}

TEST_CASE("only the requests of devices that hold their waiters are counted") {
    Topology t = machine();
    BlockDevice second = t.devices[0];
    second.name = "nvme1n1";
    second.dev = "259:1";
    second.controller = "nvme1";
    t.devices.push_back(second);
    Config config = default_config();
    DeviceRule rule;
    rule.match.name = "nvme0n1";
    rule.waiter_cpus = false;
    config.devices.push_back(rule);
    Governor g(t, config, declared_costs(t));
    REQUIRE(g.devices().size() == 2);
    CHECK(g.holds_waiters());
    // Both wake the daemon; only nvme1n1's requests name waiter CPUs.
    CHECK(g.watched_devs() == WatchedDevs{{259u << 20, (259u << 20) | 1}, false, {7u << 20}});
    CHECK(g.waiter_devs() == WatchedDevs{{(259u << 20) | 1}, false, {259u << 20, 7u << 20}});
    // A hidden path that holds waiters: the range leaves out nvme0n1 too.
    t.devices[2].name = "nvme1c1n1";
    t.devices[2].dev = "";
    t.devices[2].hidden = true;
    t.devices[2].multipath_head = "nvme1n1";
    Governor hidden(t, config, declared_costs(t));
    CHECK(hidden.waiter_devs() == WatchedDevs{{}, true, {259u << 20, 7u << 20}});
}

TEST_CASE("prearm: a hidden multipath path's periodic requests get windows too") {
    Topology t = shared_queue_machine();
    t.devices[0].name = "nvme1c1n1";
    t.devices[0].dev = "";
    t.devices[0].hidden = true;
    t.devices[0].multipath_head = "nvme1n1";
    Governor g(t, default_config(), declared_costs(t));
    // The requests carry the path's real dev_t, which sysfs does not show.
    const TimePoint last = open_first_window(g);
    g.on_recorded_request(nvme0n1, 0, last + 20ms);
    CHECK(g.periodic().hits() == 1);
}

TEST_CASE("prearm: a window over two queues of one CPU is one window, one miss") {
    Topology t = shared_queue_machine();
    t.devices[0].queues[0].submit_cpus = {0}; // CPU 0 submits to queues 0 and 1
    Governor g(t, default_config(), declared_costs(t));
    g.observe(sample(0, 0, 0, 0), t0);
    std::uint64_t irq = 0; // queue 1's interrupts: queue 0 sees none
    const TimePoint at = eight_periodic_reads(g, irq);
    REQUIRE(g.isolated_requests());
    const auto opens = g.window_opens(at + 11ms);
    REQUIRE(opens);
    REQUIRE(g.prearm(*opens));
    CHECK(g.holds().percpu.size() == 2); // both queues' completion CPUs
    const auto closes = g.window_closes();
    REQUIRE(closes);
    g.observe(sample(0, irq, irq, irq), *closes, false);
    CHECK_FALSE(g.any_active());
    CHECK(g.periodic().misses() == 1);
    REQUIRE(g.periodic().period()); // one miss is not two in a row
}

namespace {

// nvme0n1 and nvme0n2, namespaces of one controller: their queue i both
// complete through nvme0q<i+1>, IRQ 10 + i.
Topology two_namespaces() {
    Topology t = machine();
    t.devices.pop_back(); // loop0
    BlockDevice n2 = t.devices[0];
    n2.name = "nvme0n2";
    n2.dev = "259:1";
    t.devices.push_back(n2);
    return t;
}

IoSample namespaces_sample(std::uint64_t irq10, std::uint64_t n1_ios, std::uint64_t n2_ios) {
    IoSample s = sample(irq10, 0, 0, 0);
    s.devices.resize(2);
    s.devices[0].read_ios = n1_ios;
    s.devices[1].read_ios = n2_ios;
    return s;
}

bool holds_for(const Holds& holds, std::string_view device) {
    for (const auto& [cpu, hold] : holds.percpu)
        for (const auto& key : hold.held_for)
            if (key.device == device)
                return true;
    return false;
}

} // namespace

TEST_CASE("an interrupt shared by two namespaces activates only the one whose IO it completed") {
    const Topology t = two_namespaces();
    Governor g(t, default_config(), declared_costs(t));
    REQUIRE(g.devices().size() == 2);
    CHECK(g.devices()[0].queues[0].irq_shared);
    g.observe(namespaces_sample(0, 0, 0), t0);
    g.observe(namespaces_sample(20, 0, 20), t0 + 5ms); // nvme0n2's reads
    Holds h = g.holds();
    CHECK(holds_for(h, "nvme0n2"));
    CHECK_FALSE(holds_for(h, "nvme0n1"));
    // nvme0n1's own completion, counted by its stat a sample after its
    // interrupt (the two are read one after the other), still activates it;
    // and so does one counted a sample before its interrupt.
    g.observe(namespaces_sample(21, 0, 20), t0 + 20ms);
    CHECK_FALSE(holds_for(g.holds(), "nvme0n1"));
    g.observe(namespaces_sample(21, 1, 20), t0 + 25ms);
    CHECK(holds_for(g.holds(), "nvme0n1"));
    Governor later(t, default_config(), declared_costs(t));
    later.observe(namespaces_sample(0, 0, 0), t0);
    later.observe(namespaces_sample(0, 1, 0), t0 + 5ms);
    CHECK_FALSE(holds_for(later.holds(), "nvme0n1"));
    later.observe(namespaces_sample(1, 1, 0), t0 + 10ms);
    CHECK(holds_for(later.holds(), "nvme0n1"));
    // The queue's requests in flight (queue_inflight): the tag set is
    // shared too, and counts for nvme0n1 only with its own in flight.
    Governor tags(t, default_config(), declared_costs(t));
    REQUIRE(tags.queue_tags().size() == 4);
    IoSample busy = namespaces_sample(0, 0, 0);
    tags.observe(busy, t0);
    busy.queue_busy = {1, 0, 1, 0};
    busy.devices[1].in_flight = 1;
    tags.observe(busy, t0 + 5ms);
    CHECK(holds_for(tags.holds(), "nvme0n2"));
    CHECK_FALSE(holds_for(tags.holds(), "nvme0n1"));
    busy.devices[0].in_flight = 1;
    tags.observe(busy, t0 + 10ms);
    CHECK(holds_for(tags.holds(), "nvme0n1"));
    // One namespace alone on its controller shares nothing.
    Governor alone(machine(), default_config(), declared_costs(machine()));
    CHECK_FALSE(alone.devices()[0].queues[0].irq_shared);
}

TEST_CASE("a namespace with mode off still shares its controller's interrupts with its sibling") {
    const Topology t = two_namespaces();
    Config config = default_config();
    DeviceRule off;
    off.match.name = "nvme0n2";
    off.mode = Mode::off;
    off.origin = "t.toml:1:1";
    config.devices.push_back(off);
    Governor g(t, config, declared_costs(t));
    REQUIRE(g.devices().size() == 1);
    CHECK(g.devices()[0].queues[0].irq_shared);
    // nvme0n2's reads complete through IRQ 10: not nvme0n1's IO.
    g.observe(namespaces_sample(0, 0, 0), t0);
    for (int i = 1; i <= 10; ++i) {
        const std::uint64_t n2_ios = 200 * static_cast<std::uint64_t>(i);
        g.observe(namespaces_sample(n2_ios, 0, n2_ios), t0 + i * 20ms);
    }
    CHECK_FALSE(g.any_active());
    // Its own completion still activates it.
    g.observe(namespaces_sample(2001, 1, 2000), t0 + 220ms);
    CHECK(holds_for(g.holds(), "nvme0n1"));
}

TEST_CASE("isolated requests: a queue sharing its IRQ tells its onset's company by issue counts") {
    // nvme0n2's write-back completes through IRQ 10 while nvme0n1's read
    // from CPU 0 is held: the interrupts cannot tell the two disks' apart,
    // CPU 0's count of requests someone waits for can.
    const Topology t = two_namespaces();
    Governor g(t, default_config(), declared_costs(t));
    g.observe(namespaces_sample(0, 0, 0), t0);
    const TimePoint at = t0 + 20ms;
    REQUIRE(g.on_request_issued(259u << 20, 0, at, std::nullopt, at));
    const auto due = g.onset_baselines_due();
    REQUIRE(due.size() == 1);
    CHECK(due[0].irqs.empty());
    CHECK(due[0].onset_cpus == CpuSet{0});
    BlockStat stat;
    stat.in_flight = 1;
    g.take_onset_baseline(0, stat, {}, {{0, 7}}); // CPU 0's 7th: the read
    // The read and three of nvme0n2's writes completed on IRQ 10 by the
    // first sample. The other CPU's event is armed: the writes, which fire
    // none, do not activate nvme0n2.
    auto first_samples = [&](std::uint64_t cpu0_issues) {
        IoSample s = namespaces_sample(4, 1, 0);
        s.devices[1].write_ios = 3;
        s.cpu_issues = {cpu0_issues, issues_unread};
        g.observe(s, at + 5ms, true);
        g.observe(s, at + 10ms, true);
        CHECK_FALSE(g.any_active());
    };
    SUBCASE("nothing more issued from CPU 0: the writes are no company") {
        first_samples(7);
        CHECK(g.lonely_onsets() == 1);
    }
    SUBCASE("another request issued from CPU 0: company") {
        first_samples(8);
        CHECK(g.lonely_onsets() == 0);
    }
    SUBCASE("CPU 0's count not read: the interrupts tell, the writes' included") {
        first_samples(issues_unread);
        CHECK(g.lonely_onsets() == 0);
    }
    SUBCASE("without waiter CPUs nothing is due") {
        Config config = default_config();
        config.defaults.waiter_cpus = false;
        Governor off(t, config, declared_costs(t));
        off.observe(namespaces_sample(0, 0, 0), t0);
        REQUIRE(off.on_request_issued(259u << 20, 0, at, std::nullopt, at));
        CHECK(off.onset_baselines_due().empty());
    }
}

TEST_CASE("isolated requests: another disk's queue activated by its completions beside an onset") {
    // nvme0n1's read from CPU 0 is held, and CPU 0's event is disarmed:
    // nvme0n2's write-back completes, and the sample activates nvme0n2's
    // queue 0 (a request someone waits for from a disarmed CPU fires
    // nothing). Where the onset's issue counts watch each submit CPU of
    // that queue, a request someone waits for would be the onset's
    // company: the queue's own release leaves the streak as it is.
    Topology t = two_namespaces();
    bool covered = true;
    SUBCASE("its submit CPUs are the onset's") {}
    SUBCASE("CPU 1 submits to it too, and no onset counts CPU 1") {
        t.devices[1].queues[0].submit_cpus = {0, 1};
        covered = false;
    }
    Governor g(t, default_config(), declared_costs(t));
    g.observe(namespaces_sample(0, 0, 0), t0);
    const TimePoint at = t0 + 20ms;
    REQUIRE(g.on_request_issued(259u << 20, 0, at, std::nullopt, at));
    BlockStat stat;
    stat.in_flight = 1;
    g.take_onset_baseline(0, stat, {}, {{0, 7}});
    IoSample s = namespaces_sample(4, 1, 0);
    s.devices[1].write_ios = 3;
    s.cpu_issues = {7, issues_unread};
    g.observe(s, at + 5ms, false);
    REQUIRE(holds_for(g.holds(), "nvme0n2"));
    SUBCASE("both released") {
        g.observe(s, at + 10ms, false);
        CHECK_FALSE(g.any_active());
        CHECK(g.lonely_onsets() == (covered ? 1 : 0));
    }
    SUBCASE("a request event on it while it is active is company") {
        CHECK_FALSE(g.on_request_issued((259u << 20) | 1, 0, at + 6ms, std::nullopt, at + 6ms));
        g.observe(s, at + 10ms, false);
        CHECK_FALSE(g.any_active());
        CHECK(g.lonely_onsets() == 0);
    }
}

namespace {

// nvme0n1 and nvme1n1, namespaces of two controllers: nvme1n1's queues
// complete on IRQs 12 and 13 of their own.
Topology two_controllers() {
    Topology t = machine();
    t.devices.pop_back(); // loop0
    BlockDevice other = t.devices[0];
    other.name = "nvme1n1";
    other.dev = "259:1";
    other.controller = "nvme1";
    other.queues = {irq_queue(0, 12, {0}, {0}), irq_queue(1, 13, {1}, {1})};
    t.devices.push_back(other);
    return t;
}

// IRQ 10 (nvme0n1's queue 0) and 12 (nvme1n1's), nvme0n1's reads,
// nvme1n1's writes, and CPU 0's count of requests someone waits for.
IoSample controllers_sample(std::uint64_t irq10, std::uint64_t irq12, std::uint64_t reads,
                            std::uint64_t writes, std::uint64_t cpu0_issues) {
    IoSample s;
    s.irq_counts.assign(14, 0);
    s.irq_counts[10] = irq10;
    s.irq_counts[12] = irq12;
    s.devices.resize(2);
    s.devices[0].read_ios = reads;
    s.devices[1].write_ios = writes;
    s.cpu_issues = {cpu0_issues, issues_unread};
    return s;
}

// An onset on nvme0n1's queue 0 from CPU 0 at `at`, its baseline taken
// with CPU 0's count at 7.
Governor onset_beside_another_controller(TimePoint at) {
    const Topology t = two_controllers();
    Governor g(t, default_config(), declared_costs(t));
    REQUIRE(g.devices().size() == 2);
    g.observe(controllers_sample(0, 0, 0, 0, 7), t0);
    REQUIRE(g.on_request_issued(259u << 20, 0, at, std::nullopt, at));
    BlockStat stat;
    stat.in_flight = 1;
    g.take_onset_baseline(0, stat, {{10, 0}}, {{0, 7}});
    return g;
}

} // namespace

TEST_CASE("isolated requests: a tick that releases an onset counts what it watched until then") {
    // A late tick sees nvme1n1's write completed and releases nvme0n1's
    // onset, whose last IO the tick before saw: it activates nvme1n1's
    // queue 0, watched by the onset's count of CPU 0 as the tick began.
    const TimePoint at = t0 + 20ms;
    Governor g = onset_beside_another_controller(at);
    g.observe(controllers_sample(1, 0, 1, 0, 7), at + 2ms, false); // the read, within the linger
    REQUIRE(holds_for(g.holds(), "nvme0n1"));
    g.observe(controllers_sample(1, 1, 1, 1, 7), at + 200ms, false); // the write, late
    REQUIRE_FALSE(holds_for(g.holds(), "nvme0n1"));
    REQUIRE(holds_for(g.holds(), "nvme1n1"));
    CHECK(g.lonely_onsets() == 1);
    g.observe(controllers_sample(1, 1, 1, 1, 7), at + 400ms, false);
    CHECK_FALSE(g.any_active());
    CHECK(g.lonely_onsets() == 1);
}

TEST_CASE("isolated requests: a queue counted by an onset watches those counts after it") {
    // nvme1n1's write-back goes on after nvme0n1's onset is released: its
    // queue 0 watches CPU 0's count from then on, which no onset does.
    const TimePoint at = t0 + 20ms;
    Governor g = onset_beside_another_controller(at);
    g.observe(controllers_sample(1, 1, 1, 1, 7), at + 2ms, false);
    REQUIRE(holds_for(g.holds(), "nvme1n1"));
    g.observe(controllers_sample(1, 2, 1, 2, 7), at + 10ms, false);
    REQUIRE_FALSE(holds_for(g.holds(), "nvme0n1"));
    REQUIRE(g.lonely_onsets() == 1);
    std::uint64_t cpu0_issues = 7;
    int lonely = 1;
    SUBCASE("CPU 0 issues nothing more: it leaves the streak as it is") {}
    SUBCASE("CPU 0 issues a request someone waits for: company") {
        cpu0_issues = 8;
        lonely = 0;
    }
    SUBCASE("CPU 0's count goes unread: company, as unknown") {
        cpu0_issues = issues_unread;
        lonely = 0;
    }
    g.observe(controllers_sample(1, 3, 1, 3, cpu0_issues), at + 12ms, false);
    g.observe(controllers_sample(1, 3, 1, 3, cpu0_issues), at + 200ms, false);
    CHECK_FALSE(g.any_active());
    CHECK(g.lonely_onsets() == lonely);
}

TEST_CASE("IRQ counts: 32 bits, and a count that went down was reset and says nothing") {
    CHECK(irq_count_delta(100, 105) == 5);
    CHECK(irq_count_delta(0xFFFFFFF0u, 0xFFFFFFF3u) == 3);
    CHECK(irq_count_delta(1000000, 3) == 0); // the IRQ was freed and allocated again
    CHECK(irq_count_delta(0x1'0000'0005u, 0x0000'0007u) == 2); // only 32 bits count
    Governor g(machine(), default_config(), declared_costs(machine()));
    g.observe(sample(4000000, 0, 100, 10), t0);
    g.observe(sample(4000000, 0, 100, 10), t0 + 5ms);
    // Queue 0's IRQ count starts again from 2, with no IO on the disk.
    CHECK_FALSE(g.observe(sample(2, 0, 100, 10), t0 + 10ms));
    CHECK_FALSE(g.any_active());
    CHECK(g.observe(sample(4, 0, 102, 11), t0 + 15ms));
    CHECK(g.holds().percpu.count(0) == 1);
}

TEST_CASE("a limit that changes on a CPU with other idle costs than the first is a change") {
    // CPU 1 is calibrated: its C1E costs 30 us, CPU 0's as declared.
    auto costs = declared_costs(machine());
    costs.at(1)[2].cost_us = 30.0;
    Governor g(machine(), default_config(), costs);
    g.observe(sample(0, 0, 0, 0), t0);
    // A 100 us mean allows 10 us: CPU 0 keeps C1E (4), CPU 1 only C1 (1).
    CHECK(g.observe(sample(1000, 1000, 2000, 200), t0 + 5ms));
    CHECK(g.holds().percpu.at(0).limit == LatencyLimit{4});
    CHECK(g.holds().percpu.at(1).limit == LatencyLimit{1});
    // Slower requests (a 550 us mean): CPU 1's C1E fits, CPU 0's limit stays.
    CHECK(g.observe(sample(1050, 1050, 2100, 300), t0 + 10ms));
    CHECK(g.holds().percpu.at(0).limit == LatencyLimit{4});
    CHECK(g.holds().percpu.at(1).limit == LatencyLimit{4});
}

namespace {

// One request at a time on vda (IRQ 36, completing on CPU 1): issued every
// `period_us`, each `service_us` long, sampled every `tick`.
struct OneAtATime {
    double period_us = 6150;
    double service_us = 150;
    IoSample at(TimePoint now) const {
        const double t_us = std::chrono::duration<double, std::micro>(now - t0).count();
        // Requests issued at 1000 us + k * period.
        const double since = t_us - 1000;
        const auto issued =
            since < 0 ? std::uint64_t{0} : static_cast<std::uint64_t>(since / period_us) + 1;
        const auto done = since < service_us
                              ? std::uint64_t{0}
                              : static_cast<std::uint64_t>((since - service_us) / period_us) + 1;
        IoSample s;
        s.irq_counts.assign(38, 0);
        s.irq_counts[36] = done;
        BlockStat stat;
        stat.read_ios = done;
        stat.read_ticks_ms =
            static_cast<std::uint64_t>(static_cast<double>(done) * service_us / 1000);
        stat.in_flight = issued - done;
        s.devices = {stat};
        return s;
    }
};

struct Run {
    int activations = 0;
    int late_activations = 0; // after the first 500 ms
    int held_ticks = 0;
    int unheld_active_ticks = 0;
};

Run run_ticks(Governor& g, const OneAtATime& io, std::chrono::milliseconds length,
              std::chrono::milliseconds tick = 5ms) {
    Run r;
    g.observe(io.at(t0), t0);
    for (TimePoint now = t0 + tick; now <= t0 + length; now += tick) {
        const bool was = g.any_active();
        g.observe(io.at(now), now);
        if (!was && g.any_active()) {
            ++r.activations;
            if (now - t0 > 500ms)
                ++r.late_activations;
        }
        if (!g.holds().percpu.empty())
            ++r.held_ticks;
        else if (g.any_active())
            ++r.unheld_active_ticks;
    }
    return r;
}

} // namespace

TEST_CASE("a stream whose gaps outlast the tick and the linger learns its gap between releases") {
    const Topology t = virtio_machine("haltpoll", "haltpoll");
    for (double period_us : {6150.0, 8150.0}) {
        CAPTURE(period_us);
        Governor g(t, default_config(), declared_costs(t));
        const Run r = run_ticks(g, OneAtATime{period_us, 150}, 6s);
        const GovernedDevice& vda = g.devices()[0];
        // The gap is learnt (first between releases, then from windows), and
        // linger covers it: the stream stays active instead of being
        // released after each request and taken again.
        REQUIRE(vda.evidence.gap_us());
        CHECK(*vda.evidence.gap_us() == doctest::Approx(period_us - 150).epsilon(0.05));
        CHECK(g.linger_of(vda) >=
              std::chrono::milliseconds(static_cast<long>(2 * (period_us - 150) / 1000)));
        // A few spans while the first requests are counted, none after.
        CHECK(r.activations <= 6);
        CHECK(r.late_activations == 0);
        // So windows finish and the experiment alternates: some active
        // ticks are held, some not.
        CHECK(vda.evidence.windows() >= 3);
        CHECK(r.held_ticks > 0);
        CHECK(r.unheld_active_ticks > 0);
    }
}

TEST_CASE("a stream woken by its requests, released in the first tick after each, learns its gap") {
    // As latgovd runs it: idle, a request's event activates the queue and
    // the first tick comes a sample interval later, past the linger, so
    // each request is released in the first tick after its onset. The
    // spans between those releases still show the gap, and auto linger
    // then holds through it before the requests count as isolated.
    const Topology t = virtio_machine("haltpoll", "haltpoll");
    Governor g(t, default_config(), declared_costs(t));
    const OneAtATime io{6150, 150};
    g.observe(io.at(t0), t0, true);
    std::optional<TimePoint> tick;
    int onsets = 0;
    for (int k = 0; k < 20; ++k) {
        const TimePoint at = t0 + 1000us + k * 6150us;
        while (tick && *tick <= at) {
            g.observe(io.at(*tick), *tick, true);
            tick = g.any_active() ? std::optional(*tick + 5ms) : std::nullopt;
        }
        if (g.on_request_issued(253u << 20, 0, at, true, at)) {
            ++onsets;
            tick = at + 5ms;
        }
    }
    const GovernedDevice& vda = g.devices()[0];
    REQUIRE(vda.evidence.gap_us());
    CHECK(*vda.evidence.gap_us() == doctest::Approx(6000).epsilon(0.05));
    CHECK(g.linger_of(vda) >= 12ms);
    CHECK(onsets <= 6); // a span of span_min_ios completions, then held through
    CHECK_FALSE(g.isolated_requests());
    CHECK(g.any_active());
}

TEST_CASE("a known verdict at the gap learnt between releases is followed: no hold where it buys "
          "nothing") {
    const Topology t = virtio_machine("haltpoll", "haltpoll");
    EvidenceBook book;
    book.gaps[gap_class(6000)].verdict = Verdict::no_hold;
    Governor g(t, default_config(), declared_costs(t), book);
    const Run r = run_ticks(g, OneAtATime{6150, 150}, 2s);
    // Held only until the gap was known (the first two spans), not for 2 s.
    CHECK(r.held_ticks <= 10);
    CHECK_FALSE(g.devices()[0].decision.hold);
    CHECK(g.any_active());
}

TEST_CASE("before its first tick a device that learns says it measures, as after it") {
    const Topology t = virtio_machine("haltpoll", "haltpoll");
    Governor g(t, default_config(), declared_costs(t), EvidenceBook{});
    const auto before = g.devices()[0].decision;
    const auto reason = g.limit_reason(g.devices()[0]);
    CHECK(before.experimenting);
    CHECK(before.hold);
    CHECK(reason.find("no gap between requests measured yet") != std::string::npos);
    // The first tick only takes the baseline: the same after it.
    run_ticks(g, OneAtATime{6150, 150}, 0s);
    CHECK(g.devices()[0].decision.experimenting == before.experimenting);
    CHECK(g.limit_reason(g.devices()[0]) == reason);
    // Where costs decide, nothing is said to be measured.
    const Topology menu = virtio_machine("intel_idle", "menu");
    Governor costs(menu, default_config(), declared_costs(menu), EvidenceBook{});
    CHECK_FALSE(costs.devices()[0].decision.experimenting);
}

TEST_CASE("a dry-run device whose evidence decides measures nothing and says so") {
    const Topology t = virtio_machine("haltpoll", "haltpoll");
    Config config = default_config();
    config.defaults.backend = Backend::dry_run;
    Governor dry(t, config, declared_costs(t), EvidenceBook{});
    Governor real(t, default_config(), declared_costs(t), EvidenceBook{});
    run_ticks(dry, OneAtATime{6150, 150}, 300ms);
    run_ticks(real, OneAtATime{6150, 150}, 300ms);
    const auto& logged = dry.devices()[0];
    // Uncertain at its gap, as the device held for real...
    REQUIRE(logged.decision.gap_class);
    CHECK(logged.decision.experimenting);
    CHECK(real.experiments(real.devices()[0]));
    // ...but it alternates no windows: it holds nothing to compare.
    CHECK_FALSE(dry.experiments(logged));
    CHECK(dry.evidence().gaps.empty());
    CHECK_FALSE(dry.holds().dry_run.empty()); // the hold is logged
    const auto reason = dry.limit_reason(logged);
    CHECK(reason.find("a dry-run device holds nothing, so it measures nothing") !=
          std::string::npos);
    CHECK(reason.find("alternating") == std::string::npos);
}

TEST_CASE("the haltpoll driver under menu: the declared 1 us is no cost, live IO decides") {
    const Topology t = virtio_machine("haltpoll", "menu");
    Governor g(t, default_config(), declared_costs(t));
    REQUIRE(g.evidence_decides(g.devices()[0]));
    g.observe(OneAtATime{}.at(t0), t0);
    g.observe(OneAtATime{}.at(t0 + 5ms), t0 + 5ms);
    REQUIRE(g.any_active());
    // Nothing learnt yet: the experiment's first arm holds 0, which
    // excludes the halt under menu too.
    REQUIRE(g.holds().percpu.count(1) == 1);
    CHECK(g.holds().percpu.at(1).limit == LatencyLimit{0});
}

namespace {

// A closed loop of 4k reads at `cycle_us` per request, 20 ms ticks, on vda
// and (optionally) a steady stream on vdb.
struct TwoDisks {
    std::uint64_t ios = 0;
    double busy_ms = 0;
    double carry = 0;
    std::uint64_t other = 0;
    IoSample next(double cycle_us, double service_us, bool other_busy) {
        carry += 20000.0 / cycle_us;
        const auto n = static_cast<std::uint64_t>(carry);
        carry -= static_cast<double>(n);
        ios += n;
        busy_ms += static_cast<double>(n) * service_us / 1000.0;
        if (other_busy)
            other += 50;
        IoSample s;
        s.irq_counts.assign(38, 0);
        s.irq_counts[36] = ios;
        s.irq_counts[37] = other;
        BlockStat a;
        a.read_ios = ios;
        a.read_ticks_ms = static_cast<std::uint64_t>(busy_ms);
        BlockStat b;
        b.read_ios = other;
        b.read_ticks_ms = other / 10;
        s.devices = {a, b};
        return s;
    }
};

Topology two_virtio_disks() {
    Topology t = virtio_machine("haltpoll", "haltpoll");
    BlockDevice vdb = t.devices[0];
    vdb.name = "vdb";
    vdb.dev = "253:16";
    vdb.queues[0].irq = 37;
    vdb.queues[0].irq_name = "virtio2-req.0";
    t.devices.push_back(vdb);
    return t;
}

int pairs_of(const Governor& g) {
    int pairs = 0;
    for (const auto& [cls, e] : g.evidence().gaps)
        pairs += e.gains.pairs;
    return pairs;
}

// The default, and vdb held at 0 whenever it has IO.
Config vdb_fixed_at_0() {
    Config config = default_config();
    DeviceRule fixed;
    fixed.match.name = "vdb";
    fixed.mode = Mode::fixed;
    fixed.limit_us = 0;
    fixed.origin = "t.toml:1:1";
    config.devices.push_back(fixed);
    return config;
}

} // namespace

TEST_CASE("a window without the hold while another device held the same CPU is not counted") {
    const Config config = vdb_fixed_at_0();
    const Topology t = two_virtio_disks();
    Governor g(t, config, declared_costs(t));
    REQUIRE(g.devices().size() == 2);
    TwoDisks io;
    g.observe(io.next(1e9, 40, false), t0);
    TimePoint now = t0;
    bool saw_deferred_arm = false;
    // vdb streams all along and holds CPU 1 at 0: vda's arm without the
    // hold is held anyway (vda holds too meanwhile), and its windows must
    // not enter the evidence.
    for (int i = 1; i < 300; ++i) {
        now += 20ms;
        saw_deferred_arm |=
            g.devices()[0].decision.experimenting && g.devices()[0].decision.deferred;
        g.observe(io.next(1090, 40, true), now); // CPU 1 held: the held cycle
    }
    CHECK(saw_deferred_arm);
    CHECK(pairs_of(g) == 0);
    CHECK_FALSE(g.take_evidence_changed());
    // vdb goes idle: vda's windows without the hold count again.
    for (int i = 0; i < 300 && pairs_of(g) == 0; ++i) {
        now += 20ms;
        const bool held = g.holds().percpu.count(1) == 1;
        g.observe(io.next(held ? 1090 : 1150, held ? 40 : 50, false), now);
    }
    CHECK(pairs_of(g) > 0);
}

TEST_CASE("while another device holds some of its CPUs, a learning device holds the rest too, "
          "and its experiment goes on once the other stops") {
    const Config config = vdb_fixed_at_0();
    Topology t = two_virtio_disks();
    t.devices[0].queues[0].completion_cpus = {0, 1}; // vda completes on both, vdb on CPU 1
    Governor g(t, config, declared_costs(t));
    REQUIRE(g.devices().size() == 2);
    TwoDisks io;
    g.observe(io.next(1e9, 40, false), t0);
    TimePoint now = t0;
    int cpu0_held = 0;
    int says_why = 0;
    // vdb streams all along and holds CPU 1: vda's arm without the hold
    // cannot be measured, and vda holds CPU 0 as well meanwhile.
    for (int i = 1; i < 300; ++i) {
        now += 20ms;
        g.observe(io.next(1090, 40, true), now);
        cpu0_held += static_cast<int>(g.holds().percpu.count(0));
        const auto& vda = g.devices()[0];
        if (vda.decision.experimenting && !vda.decision.hold)
            FAIL("vda in its arm without the hold while vdb holds CPU 1");
        says_why += g.limit_reason(vda).find("another device holds") != std::string::npos;
    }
    CHECK(cpu0_held == 299);
    CHECK(says_why > 0);
    CHECK(pairs_of(g) == 0);
    CHECK(g.devices()[0].decision.experimenting);
    // vdb goes idle: vda's experiment goes on and decides.
    for (int i = 0; i < 500 && g.devices()[0].decision.experimenting; ++i) {
        now += 20ms;
        const bool held = g.holds().percpu.count(0) == 1;
        g.observe(io.next(held ? 1090 : 1150, held ? 40 : 50, false), now);
    }
    CHECK_FALSE(g.devices()[0].decision.experimenting);
    CHECK(g.devices()[0].decision.hold);
    CHECK(pairs_of(g) >= EvidenceRules{}.min_pairs);
}

TEST_CASE("two learning devices on one CPU do not hold each other's experiments back") {
    const Topology t = two_virtio_disks();
    // vda gains from the hold of CPU 1, whoever holds it; vdb's steady
    // stream at other gaps gains nothing. Each one's arm without the hold
    // needs the other's without it too, whatever the phase of their
    // windows.
    for (int vdb_from : {1, 5, 13, 20}) {
        CAPTURE(vdb_from);
        Governor g(t, default_config(), declared_costs(t));
        REQUIRE(g.devices().size() == 2);
        REQUIRE(g.evidence_decides(g.devices()[1]));
        TwoDisks io;
        g.observe(io.next(1e9, 40, false), t0);
        TimePoint now = t0;
        const auto learning = [&g] {
            return std::any_of(g.devices().begin(), g.devices().end(),
                               [](const GovernedDevice& d) { return d.decision.experimenting; });
        };
        for (int i = 1; i < 3000 && (i < 30 || learning()); ++i) {
            now += 20ms;
            const bool held = g.holds().percpu.count(1) == 1;
            g.observe(io.next(held ? 1090 : 1150, held ? 40 : 50, i >= vdb_from), now);
        }
        CHECK_FALSE(learning());
        CHECK(g.devices()[0].decision.hold);
        CHECK_FALSE(g.devices()[1].decision.hold);
    }
}

namespace {

// 700 ms of IO on vda, where the hold of CPU 1 gains clearly, then 1 s
// idle; `unheld` counts the active ticks without the hold.
void burst(Governor& g, TwoDisks& io, TimePoint& now, int& unheld) {
    for (int i = 0; i < 35; ++i) {
        now += 20ms;
        const bool held = g.holds().percpu.count(1) == 1;
        unheld += !held && g.any_active();
        g.observe(io.next(held ? 1090 : 1150, held ? 40 : 50, false), now);
    }
    for (int i = 0; i < 50; ++i) {
        now += 20ms;
        g.observe(io.next(1e9, 40, false), now);
    }
}

} // namespace

TEST_CASE("bursts of IO too short for a window pair complete their pairs across the idle between") {
    const Topology t = virtio_machine("haltpoll", "haltpoll");
    Governor g(t, default_config(), declared_costs(t));
    TwoDisks io;
    g.observe(io.next(1e9, 40, false), t0);
    TimePoint now = t0;
    int bursts = 0;
    // One window per burst (200 ms to settle, then 300 ms): the next burst
    // runs the pair's other arm.
    for (; bursts < 40; ++bursts) {
        int unheld = 0;
        burst(g, io, now, unheld);
        if (!g.devices()[0].decision.experimenting && g.devices()[0].decision.gap_class)
            break;
    }
    CHECK(bursts < 20);
    CHECK(pairs_of(g) >= EvidenceRules{}.min_pairs);
    CHECK(g.devices()[0].decision.hold);
    // Decided: every burst from now on is held throughout.
    int unheld = 0;
    for (int i = 0; i < 5; ++i)
        burst(g, io, now, unheld);
    CHECK(unheld == 0);
}

TEST_CASE("a device under dry-run holds nothing, so it runs no experiment and learns nothing") {
    Config config = default_config();
    config.defaults.backend = Backend::dry_run;
    const Topology t = virtio_machine("haltpoll", "haltpoll");
    Governor g(t, config, declared_costs(t));
    TwoDisks io;
    IoSample s = io.next(1e9, 40, false);
    s.devices.resize(1);
    g.observe(s, t0);
    bool changed = false;
    for (int i = 1; i < 300; ++i) {
        // As if what dry-run would hold were held: a clear gain.
        const bool held = g.holds().dry_run.count(1) == 1;
        s = io.next(held ? 1090 : 1150, held ? 40 : 50, false);
        s.devices.resize(1);
        g.observe(s, t0 + i * 20ms);
        changed |= g.take_evidence_changed();
    }
    CHECK(g.devices()[0].evidence.windows() > 0); // it did track its gap
    CHECK_FALSE(changed);
    CHECK(pairs_of(g) == 0);
    CHECK(g.evidence().gaps.empty());
}
