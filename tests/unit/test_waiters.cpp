// Waiter CPUs on plain structs: /proc/stat text, iowait samples and times.
#include "latgov/governor.hpp"
#include "latgov/waiters.hpp"
#include "machines.hpp"

#include <doctest/doctest.h>

using namespace latgov;
using namespace std::chrono_literals;

namespace {

const TimePoint t0{};

std::string proc_stat(std::uint64_t iowait0, std::uint64_t iowait1) {
    return "cpu  100 0 50 1000 " + std::to_string(iowait0 + iowait1) +
           " 0 3 0 0 0\n"
           "cpu0 60 0 20 500 " +
           std::to_string(iowait0) +
           " 0 1 0 0 0\n"
           "cpu1 40 0 30 500 " +
           std::to_string(iowait1) +
           " 0 2 0 0 0\n"
           "intr 1234 0 5\nctxt 99\n";
}

IoSample vda_sample(std::uint64_t irqs, std::uint64_t ios, std::uint64_t ticks_ms,
                    std::vector<std::uint64_t> iowait) {
    IoSample s;
    s.irq_counts.assign(37, 0);
    s.irq_counts[36] = irqs;
    BlockStat stat;
    stat.write_ios = ios;
    stat.write_ticks_ms = ticks_ms;
    s.devices = {stat};
    s.cpu_iowait = std::move(iowait);
    return s;
}

Config fixed_zero() {
    Config config = default_config();
    config.defaults.mode = Mode::fixed;
    config.defaults.limit_us = 0;
    return config;
}

} // namespace

TEST_CASE("per-CPU iowait is the fifth number of each cpuN line") {
    std::vector<std::uint64_t> iowait;
    REQUIRE(parse_stat_cpu_iowait(proc_stat(7, 1234567890123), iowait));
    CHECK(iowait == std::vector<std::uint64_t>{7, 1234567890123});
    // A CPU gone offline has no line: it reads 0, the vector keeps its size.
    REQUIRE(parse_stat_cpu_iowait("cpu  1 2 3 4 5\ncpu1 1 2 3 4 9 0 0\nintr 0\n", iowait));
    CHECK(iowait == std::vector<std::uint64_t>{0, 9});
}

TEST_CASE("malformed cpu lines are errors that quote the line") {
    std::vector<std::uint64_t> iowait;
    auto short_line = parse_stat_cpu_iowait("cpu0 1 2 3\n", iowait);
    REQUIRE_FALSE(short_line);
    CHECK(short_line.error().message == "bad cpu line \"cpu0 1 2 3\"");
    auto bad = parse_stat_cpu_iowait("cpu0 1 2 3 4 x5 6\n", iowait);
    REQUIRE_FALSE(bad);
    CHECK(bad.error().message == "bad iowait \"x5\" in line \"cpu0 1 2 3 4 x5 6\"");
    CHECK_FALSE(parse_stat_cpu_iowait("intr 1 2\n", iowait));
    CHECK_FALSE(parse_stat_cpu_iowait("cpuX 1 2 3 4 5\n", iowait));
}

TEST_CASE("a CPU is a waiter while its iowait grew within the window, inside the bound") {
    WaiterCpus w;
    w.observe_iowait(std::vector<std::uint64_t>{10, 10, 10}, t0); // baseline only
    CHECK(w.select({0, 1, 2}, t0, waiter_window).empty());
    w.observe_iowait(std::vector<std::uint64_t>{11, 10, 12}, t0 + 20ms);
    CHECK(w.select({0, 1, 2}, t0 + 20ms, waiter_window) == CpuSet{0, 2});
    // The queue's submit CPUs bound the choice: CPU 2 waits for another queue.
    CHECK(w.select({0, 1}, t0 + 20ms, waiter_window) == CpuSet{0});
    // No growth since: still a waiter through the window, not after it.
    w.observe_iowait(std::vector<std::uint64_t>{11, 10, 12}, t0 + 300ms);
    CHECK(w.select({0, 1, 2}, t0 + 320ms, waiter_window) == CpuSet{0, 2});
    CHECK(w.select({0, 1, 2}, t0 + 321ms, waiter_window).empty());
    CHECK_FALSE(w.any(t0 + 321ms, waiter_window));
    // The CPU a request was issued from counts at once, before any iowait tick.
    w.observe_submit(1, t0 + 400ms);
    CHECK(w.select({0, 1, 2}, t0 + 400ms, waiter_window) == CpuSet{1});
    // Bound CPUs never seen and negative/huge ids are not selected.
    CHECK(w.select({5, 7}, t0 + 400ms, waiter_window).empty());
}

TEST_CASE("a waiter that moves away and comes back keeps its CPU held longer") {
    WaiterCpus w;
    w.observe_submit(0, t0);
    CHECK(w.select({0, 1}, t0 + 300ms, waiter_window) == CpuSet{0});
    CHECK(w.select({0, 1}, t0 + 301ms, waiter_window).empty()); // it left: released
    // It comes back: from now on a lapse of up to 2 s keeps the CPU.
    w.observe_submit(0, t0 + 700ms);
    CHECK(w.select({0, 1}, t0 + 700ms + 1500ms, waiter_window) == CpuSet{0});
    CHECK(w.select({0, 1}, t0 + 700ms + returning_waiter_window, waiter_window) == CpuSet{0});
    CHECK(w.select({0, 1}, t0 + 701ms + returning_waiter_window, waiter_window).empty());
    // Seen again within the memory of its last sign: still a returning one.
    const auto back = t0 + 700ms + 4s;
    w.observe_submit(0, back);
    CHECK(w.select({0, 1}, back + 1500ms, waiter_window) == CpuSet{0});
    // Away longer than waiter_memory: a newcomer again, 300 ms.
    const auto later = back + waiter_memory + 1ms;
    w.observe_submit(0, later);
    CHECK(w.select({0, 1}, later + 300ms, waiter_window) == CpuSet{0});
    CHECK(w.select({0, 1}, later + 301ms, waiter_window).empty());
    // A CPU seen steadily (every tick) never counts as returning.
    WaiterCpus steady;
    for (int i = 0; i < 50; ++i)
        steady.observe_submit(1, t0 + std::chrono::milliseconds(20 * i));
    CHECK(steady.select({0, 1}, t0 + 980ms + 301ms, waiter_window).empty());
}

TEST_CASE("an active queue holds its completion CPU and the CPU where its IO is waited for") {
    Governor g(virtio_machine(), fixed_zero(), declared_costs(virtio_machine()));
    g.observe(vda_sample(0, 0, 0, {0, 0}), t0);
    // fio pinned to CPU 0 writes and fdatasyncs; the IRQ completes on CPU 1.
    CHECK(g.observe(vda_sample(100, 100, 10, {3, 0}), t0 + 20ms));
    Holds h = g.holds();
    REQUIRE(h.percpu.size() == 2);
    CHECK(h.percpu.at(1).limit == LatencyLimit{0});
    CHECK(h.percpu.at(1).held_for == std::vector<QueueKey>{{"vda", 0, HoldRole::completes}});
    CHECK(h.percpu.at(0).limit == LatencyLimit{0});
    CHECK(h.percpu.at(0).held_for == std::vector<QueueKey>{{"vda", 0, HoldRole::waits}});
    CHECK(g.devices()[0].queues[0].waiters == CpuSet{0});
    // IO goes on but nobody waits on CPU 0 any more: released after the window.
    for (std::uint64_t i = 1; i <= 20; ++i)
        g.observe(vda_sample(100 + i * 100, 100 + i * 100, 10 + i * 10, {3, 0}),
                  t0 + 20ms + std::chrono::milliseconds(i * 20));
    h = g.holds();
    CHECK(h.percpu.size() == 1);
    CHECK(h.percpu.count(1) == 1);
}

TEST_CASE("waiter_cpus = false holds the completion CPU only") {
    Config config = fixed_zero();
    config.defaults.waiter_cpus = false;
    Governor g(virtio_machine(), config, declared_costs(virtio_machine()));
    g.observe(vda_sample(0, 0, 0, {0, 0}), t0);
    g.observe(vda_sample(100, 100, 10, {3, 0}), t0 + 20ms);
    CHECK(g.on_request_issued(253u << 20, 0, t0 + 25ms) == false); // already active
    Holds h = g.holds();
    REQUIRE(h.percpu.size() == 1);
    CHECK(h.percpu.count(1) == 1);
}

TEST_CASE("at onset the submitting CPU is held with the completion CPU, before any iowait") {
    Governor g(virtio_machine(), fixed_zero(), declared_costs(virtio_machine()));
    g.observe(vda_sample(0, 0, 0, {0, 0}), t0);
    CHECK(g.on_request_issued(253u << 20, 0, t0 + 1ms));
    Holds h = g.holds();
    REQUIRE(h.percpu.size() == 2);
    CHECK(h.percpu.at(0).held_for == std::vector<QueueKey>{{"vda", 0, HoldRole::waits}});
    CHECK(h.percpu.at(1).held_for == std::vector<QueueKey>{{"vda", 0, HoldRole::completes}});
}

TEST_CASE("a request's kind decides its submitter: a read or sync write waits, writeback not") {
    Governor g(virtio_machine(), fixed_zero(), declared_costs(virtio_machine()));
    g.observe(vda_sample(0, 0, 0, {0, 0}), t0);
    // Writeback from CPU 0 after idle: nobody waits for it, nothing starts.
    CHECK_FALSE(g.on_request_issued(253u << 20, 0, t0 + 1ms, false));
    CHECK_FALSE(g.any_active());
    CHECK(g.holds().percpu.empty());
    // A synchronous write from CPU 1 starts the queue: CPU 1 completes and
    // waits.
    CHECK(g.on_request_issued(253u << 20, 1, t0 + 2ms, true));
    Holds h = g.holds();
    REQUIRE(h.percpu.size() == 1);
    CHECK(h.percpu.at(1).held_for ==
          std::vector<QueueKey>{{"vda", 0, HoldRole::completes}, {"vda", 0, HoldRole::waits}});
    // More writeback from CPU 0 while it runs: nobody waits there.
    CHECK_FALSE(g.on_request_issued(253u << 20, 0, t0 + 3ms, false));
    CHECK(g.holds().percpu.size() == 1);
    // A read from CPU 0 (a CPU whose event was still armed): held at once,
    // not at the next sample's counters.
    CHECK_FALSE(g.on_request_issued(253u << 20, 0, t0 + 4ms, true));
    h = g.holds();
    REQUIRE(h.percpu.size() == 2);
    CHECK(h.percpu.at(0).held_for == std::vector<QueueKey>{{"vda", 0, HoldRole::waits}});
    // A disk latgov does not govern makes nobody a waiter.
    Governor other(virtio_machine(), fixed_zero(), declared_costs(virtio_machine()));
    other.observe(vda_sample(0, 0, 0, {0, 0}), t0);
    CHECK_FALSE(other.on_request_issued(7u << 20, 0, t0 + 1ms, true));
    CHECK(other.holds().percpu.empty());
}

TEST_CASE("an onset needs what holds() holds for its queue: completion CPU, waiter, global") {
    Governor g(virtio_machine(), fixed_zero(), declared_costs(virtio_machine()));
    g.observe(vda_sample(0, 0, 0, {0, 0}), t0);
    // A read from CPU 1 starts the queue. A request from CPU 0, where
    // nobody was seen waiting yet, needs the completion CPU alone.
    CHECK(g.on_request_issued(253u << 20, 1, t0 + 1ms, true));
    CHECK(g.onset_needs(253u << 20, 0).cpus == CpuSet{1});
    // A read from CPU 0: held as its waiter's too.
    CHECK_FALSE(g.on_request_issued(253u << 20, 0, t0 + 2ms, true));
    const auto needs = g.onset_needs(253u << 20, 0);
    CHECK(needs.cpus == CpuSet{0, 1});
    CHECK_FALSE(needs.global);
    // A disk latgov does not govern needs nothing of it.
    CHECK(g.onset_needs(7u << 20, 0).cpus.empty());
    // Without waiter CPUs, the submitter is never among them.
    Config config = fixed_zero();
    config.defaults.waiter_cpus = false;
    Governor alone(virtio_machine(), config, declared_costs(virtio_machine()));
    alone.observe(vda_sample(0, 0, 0, {0, 0}), t0);
    CHECK(alone.on_request_issued(253u << 20, 0, t0 + 1ms, true));
    CHECK(alone.onset_needs(253u << 20, 0).cpus == CpuSet{1});
    // The global backend needs the global limit, no CPU of its own.
    config = fixed_zero();
    config.defaults.backend = Backend::global;
    Governor global(virtio_machine(), config, declared_costs(virtio_machine()));
    global.observe(vda_sample(0, 0, 0, {0, 0}), t0);
    CHECK(global.on_request_issued(253u << 20, 0, t0 + 1ms, true));
    CHECK(global.onset_needs(253u << 20, 0).global);
    CHECK(global.onset_needs(253u << 20, 0).cpus.empty());
    // A dry-run device needs CPUs logged, none written.
    config = fixed_zero();
    config.defaults.backend = Backend::dry_run;
    Governor logged(virtio_machine(), config, declared_costs(virtio_machine()));
    logged.observe(vda_sample(0, 0, 0, {0, 0}), t0);
    CHECK(logged.on_request_issued(253u << 20, 0, t0 + 1ms, true));
    CHECK(logged.onset_needs(253u << 20, 0).dry_run_cpus == CpuSet{0, 1});
    CHECK(logged.onset_needs(253u << 20, 0).cpus.empty());
    // A device that holds nothing (auto, no cpuidle driver) needs nothing.
    const auto bare = virtio_machine("none");
    Governor none(bare, default_config(), declared_costs(bare));
    none.observe(vda_sample(0, 0, 0, {0, 0}), t0);
    CHECK(none.on_request_issued(253u << 20, 0, t0 + 1ms, true));
    CHECK(none.holds().percpu.empty());
    CHECK(none.onset_needs(253u << 20, 0).cpus.empty());
    CHECK_FALSE(none.onset_needs(253u << 20, 0).global);
}

TEST_CASE("idle queues hold no waiter, whatever iowait other disks cause") {
    Governor g(virtio_machine(), fixed_zero(), declared_costs(virtio_machine()));
    g.observe(vda_sample(0, 0, 0, {0, 0}), t0);
    g.observe(vda_sample(0, 0, 0, {5, 5}), t0 + 20ms);
    CHECK(g.holds().percpu.empty());
    CHECK(g.devices()[0].queues[0].waiters.empty());
}

TEST_CASE("iowait over a span longer than the waiter window is a new baseline, not a waiter") {
    WaiterCpus w;
    w.observe_iowait(std::vector<std::uint64_t>{10, 10}, t0);
    // An idle daemon slept 10 s: CPU 0's iowait grew then, long ago.
    w.observe_iowait(std::vector<std::uint64_t>{500, 10}, t0 + 10s);
    CHECK(w.select({0, 1}, t0 + 10s, waiter_window).empty());
    CHECK_FALSE(w.any(t0 + 10s, waiter_window));
    // From that baseline, growth at the next tick is now.
    w.observe_iowait(std::vector<std::uint64_t>{500, 11}, t0 + 10s + 5ms);
    CHECK(w.select({0, 1}, t0 + 10s + 5ms, waiter_window) == CpuSet{1});
    // A span within the window still counts.
    w.observe_iowait(std::vector<std::uint64_t>{501, 11}, t0 + 10s + 5ms + waiter_window);
    CHECK(w.select({0, 1}, t0 + 10s + 5ms + waiter_window, waiter_window) == CpuSet{0, 1});
}

TEST_CASE("the first sample after an idle daemon slept takes no waiter from old iowait") {
    Governor g(virtio_machine(), fixed_zero(), declared_costs(virtio_machine()));
    g.observe(vda_sample(0, 0, 0, {0, 0}), t0);
    // 10 s later a request woke the daemon: CPU 0 sat in iowait seconds
    // ago, CPU 1 issued the request now.
    g.on_request_issued(253u << 20, 1, t0 + 10s, true);
    g.observe(vda_sample(2, 2, 0, {300, 0}), t0 + 10s + 5ms);
    REQUIRE(g.any_active());
    CHECK(g.devices()[0].queues[0].waiters == CpuSet{1});
    CHECK(g.holds().percpu.count(0) == 0);
    // After a rebase too, the next tick's growth counts from it.
    g.rebase(vda_sample(3, 3, 0, {300, 0}), t0 + 10s + 10ms);
    g.observe(vda_sample(4, 4, 0, {301, 0}), t0 + 10s + 15ms);
    CHECK(g.devices()[0].queues[0].waiters == CpuSet{0, 1});
}

TEST_CASE("request issue counts name the submitting CPUs tick by tick, a cleared read is a "
          "baseline") {
    WaiterCpus w;
    w.observe_issues(std::vector<std::uint64_t>{100, 50}, t0);
    w.observe_issues(std::vector<std::uint64_t>{100, 57}, t0 + 20ms);
    CHECK(w.select({0, 1}, t0 + 20ms, waiter_window) == CpuSet{1});
    // Idle: the daemon reads nothing and passes an empty vector; the next
    // read only sets the baseline, however much the counts moved meanwhile.
    w.observe_issues(std::vector<std::uint64_t>{}, t0 + 1s);
    w.observe_issues(std::vector<std::uint64_t>{900, 57}, t0 + 2s);
    CHECK(w.select({0, 1}, t0 + 2s, waiter_window).empty());
    w.observe_issues(std::vector<std::uint64_t>{901, 57}, t0 + 2s + 20ms);
    CHECK(w.select({0, 1}, t0 + 2s + 20ms, waiter_window) == CpuSet{0});
}

TEST_CASE("a CPU's issue count read after it was not is a baseline, not growth") {
    WaiterCpus w;
    // CPU 1 alone is in the bound: CPU 0's slot, never read, is marked.
    std::vector<std::uint64_t> issues{0, 50};
    mark_unread_issues(issues, {1});
    CHECK(issues == std::vector<std::uint64_t>{issues_unread, 50});
    w.observe_issues(issues, t0);
    // CPU 0 joins the bound: its first count is the requests of its whole
    // life (async writes, other disks' queues), none of them a waiter's.
    issues = {4000, 50};
    mark_unread_issues(issues, {0, 1});
    w.observe_issues(issues, t0 + 20ms);
    CHECK(w.select({0, 1}, t0 + 20ms, waiter_window).empty());
    w.observe_issues(std::vector<std::uint64_t>{4001, 50}, t0 + 40ms);
    CHECK(w.select({0, 1}, t0 + 40ms, waiter_window) == CpuSet{0});
    // It leaves the bound while CPU 1 stays: marked again, so its return,
    // however much it issued meanwhile, is a baseline again.
    issues = {4001, 51};
    mark_unread_issues(issues, {1});
    w.observe_issues(issues, t0 + 60ms);
    CHECK(w.select({0}, t0 + 350ms, waiter_window).empty()); // last seen at 40 ms, not 60
    w.observe_issues(std::vector<std::uint64_t>{9000, 51}, t0 + 2s);
    CHECK(w.select({0}, t0 + 2s, waiter_window).empty());
}

TEST_CASE("the governor takes issue counts as waiter evidence, bounded by the active queues") {
    Governor g(virtio_machine(), fixed_zero(), declared_costs(virtio_machine()));
    CHECK(g.waiter_bound().empty());
    IoSample s = vda_sample(0, 0, 0, {0, 0});
    g.observe(s, t0);
    s = vda_sample(50, 50, 5, {0, 0});
    g.observe(s, t0 + 20ms); // active from here; counters start
    CHECK(g.waiter_bound() == CpuSet{0, 1});
    s = vda_sample(100, 100, 10, {0, 0});
    s.cpu_issues = {10, 0};
    g.observe(s, t0 + 40ms);
    s = vda_sample(150, 150, 15, {0, 0});
    s.cpu_issues = {60, 0};
    g.observe(s, t0 + 60ms);
    Holds h = g.holds();
    REQUIRE(h.percpu.count(0) == 1);
    CHECK(h.percpu.at(0).held_for == std::vector<QueueKey>{{"vda", 0, HoldRole::waits}});
}

TEST_CASE("the global backend holds every CPU already, so no request counter is read for waiters") {
    Config config = fixed_zero();
    config.defaults.backend = Backend::global;
    Governor g(virtio_machine(), config, declared_costs(virtio_machine()));
    REQUIRE(g.can_hold());
    CHECK_FALSE(g.holds_waiters());
    CHECK(g.waiter_devs().devs.empty());
    CHECK_FALSE(g.waiter_devs().hidden_paths);
    g.observe(vda_sample(0, 0, 0, {0, 0}), t0);
    g.observe(vda_sample(50, 50, 5, {0, 0}), t0 + 20ms);
    REQUIRE(g.any_active());
    CHECK(g.holds().global == LatencyLimit{0});
    CHECK(g.waiter_bound().empty());
}

TEST_CASE("waiter_cpus, linger_ms = \"auto\" and evidence_file in the configuration") {
    auto config = parse_config("[daemon]\nevidence_file = \"/tmp/t/evidence\"\n"
                               "[defaults]\nwaiter_cpus = false\nlinger_ms = 5\n"
                               "[[device]]\nname = \"vd*\"\nlinger_ms = \"auto\"\n",
                               "t.toml");
    REQUIRE(config);
    CHECK(config->daemon.evidence_file == "/tmp/t/evidence");
    CHECK_FALSE(config->defaults.waiter_cpus);
    CHECK_FALSE(config->defaults.linger_auto);
    CHECK(config->defaults.linger == 5ms);
    const Policy vda = resolve_policy(*config, {.name = "vda"});
    CHECK(vda.linger_auto);
    CHECK_FALSE(vda.waiter_cpus);
    CHECK(default_config().defaults.linger_auto);
    CHECK(default_config().defaults.waiter_cpus);

    auto bad = parse_config("[defaults]\nlinger_ms = \"long\"\n", "t.toml");
    REQUIRE_FALSE(bad);
    CHECK(bad.error().message ==
          "t.toml:2:13: [defaults] linger_ms: must be one of auto; got \"long\"");
    auto bad_bool = parse_config("[defaults]\nwaiter_cpus = 1\n", "t.toml");
    REQUIRE_FALSE(bad_bool);
    CHECK(bad_bool.error().message ==
          "t.toml:2:15: [defaults] waiter_cpus: must be a boolean, got integer");
}
