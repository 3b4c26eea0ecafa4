// `latgov doctor`'s checks over plain facts, and `latgov explain`'s text.
#include "latgov/doctor.hpp"
#include "latgov/explain.hpp"
#include "machines.hpp"

#include <doctest/doctest.h>

using namespace latgov;

namespace {

HostFacts healthy() {
    HostFacts f;
    f.cpuidle_driver = "intel_idle";
    f.cpuidle_governor = "menu";
    f.cpu_dma_latency_known = true;
    f.latgov_running = true;
    f.cpu_values = {{0, std::nullopt}, {1, std::uint32_t{0}}};
    f.latgov_held_cpus = {1};
    f.tracefs_events = Found::yes;
    f.debugfs_block = Found::yes;
    f.run_fstype = "tmpfs";
    return f;
}

const Finding* find(const std::vector<Finding>& findings, std::string_view check) {
    for (const auto& f : findings)
        if (f.check == check)
            return &f;
    return nullptr;
}

} // namespace

TEST_CASE("a healthy host needs no attention, latgov's own holds are not someone else's") {
    const auto findings = diagnose(healthy());
    CHECK_FALSE(needs_attention(findings));
    CHECK(find(findings, "per-CPU pm_qos_resume_latency_us")->level == Finding::Level::ok);
    CHECK(format_findings(findings).find("FIX") == std::string::npos);
}

TEST_CASE("tracefs and debugfs closed to this user ask for root, not for a mount") {
    auto facts = healthy();
    facts.tracefs_events = Found::unreadable;
    facts.debugfs_block = Found::unreadable;
    const auto findings = diagnose(facts);
    CHECK_FALSE(needs_attention(findings));
    REQUIRE(find(findings, "tracefs"));
    CHECK(find(findings, "tracefs")->level == Finding::Level::note);
    CHECK(find(findings, "tracefs")->advice.find("root") != std::string::npos);
    REQUIRE(find(findings, "debugfs"));
    CHECK(find(findings, "debugfs")->result == "not readable");
}

TEST_CASE("each problem is flagged with advice") {
    struct Case {
        const char* check;
        void (*spoil)(HostFacts&);
    };
    const Case cases[] = {
        {"cpuidle driver", [](HostFacts& f) { f.cpuidle_driver = "none"; }},
        {"/dev/cpu_dma_latency", [](HostFacts& f) { f.cpu_dma_latency = 0; }},
        {"per-CPU pm_qos_resume_latency_us", [](HostFacts& f) { f.cpu_values[0] = 20; }},
        {"tracefs", [](HostFacts& f) { f.tracefs_events = Found::no; }},
        {"/run", [](HostFacts& f) { f.run_fstype = "ext4"; }},
        {"queue IRQs on isolated CPUs",
         [](HostFacts& f) {
             f.isolated_cpus = {3};
             f.irqs_by_cpu[3] = {"nvme0q4"};
         }},
        {"latgovd",
         [](HostFacts& f) {
             f.latgov_running = false;
             f.latgov_gone_pid = 4242;
         }},
    };
    for (const auto& c : cases) {
        CAPTURE(c.check);
        auto facts = healthy();
        c.spoil(facts);
        const auto findings = diagnose(facts);
        REQUIRE(find(findings, c.check));
        CHECK(find(findings, c.check)->level == Finding::Level::attention);
        CHECK_FALSE(find(findings, c.check)->advice.empty());
        CHECK(needs_attention(findings));
    }
}

TEST_CASE("an IRQ name with a line break stays within its one-line result") {
    auto facts = healthy();
    facts.isolated_cpus = {3};
    facts.irqs_by_cpu[3] = {"nvme0q4\n\x1b[2J", "nvme0q5"};
    const auto findings = diagnose(facts);
    REQUIRE(find(findings, "queue IRQs on isolated CPUs"));
    CHECK(find(findings, "queue IRQs on isolated CPUs")->result == "cpu3: nvme0q4??[2J,nvme0q5");
}

TEST_CASE("a snapshot's missing files are unknown, not a fix, and its latgovd is its status") {
    auto facts = healthy();
    facts.snapshot = true;
    facts.status_from_snapshot = true;
    facts.cpu_dma_latency_known = false;
    facts.tracefs_events = Found::unknown;
    facts.debugfs_block = Found::unknown;
    facts.mounts = Found::unknown;
    facts.has_nvme = true;
    facts.cpuidle_driver = ""; // no current_driver in the tree
    const auto findings = diagnose(facts);
    CHECK_FALSE(needs_attention(findings));
    for (const char* check :
         {"/dev/cpu_dma_latency", "tracefs", "debugfs", "/run", "NVMe APST", "cpuidle driver"}) {
        CAPTURE(check);
        REQUIRE(find(findings, check));
        CHECK(find(findings, check)->level == Finding::Level::note);
        CHECK(find(findings, check)->result.find("not in the snapshot") != std::string::npos);
        CHECK(find(findings, check)->advice.empty());
    }
    // Whether a snapshot's latgovd still runs is not this host's to tell.
    REQUIRE(find(findings, "latgovd"));
    CHECK(find(findings, "latgovd")->result == "status from the snapshot");
    CHECK(find(findings, "latgovd")->level == Finding::Level::note);
    facts.latgov_running = false;
    CHECK(find(diagnose(facts), "latgovd")->result == "no status in the snapshot");
    // A status of this host read beside the snapshot is judged as this host's.
    facts.status_from_snapshot = false;
    facts.latgov_gone_pid = 4242;
    CHECK(find(diagnose(facts), "latgovd")->result == "not running; pid 4242 left its status");
    facts.latgov_gone_pid.reset();
    // What the snapshot holds is judged as on the live host.
    facts.cpuidle_driver = "none";
    CHECK(find(diagnose(facts), "cpuidle driver")->level == Finding::Level::attention);
    facts.tracefs_events = Found::no;
    facts.mounts = Found::yes;
    facts.run_fstype = "ext4";
    const auto spoiled = diagnose(facts);
    CHECK(find(spoiled, "tracefs")->level == Finding::Level::attention);
    CHECK(find(spoiled, "/run")->level == Finding::Level::attention);
}

TEST_CASE("a status file that cannot be read is a fix, named") {
    auto facts = healthy();
    facts.latgov_running = false;
    facts.status_error = "Failed to parse /run/latgov/status.json: not a JSON object";
    const auto findings = diagnose(facts);
    CHECK(needs_attention(findings));
    REQUIRE(find(findings, "latgovd"));
    CHECK(find(findings, "latgovd")->level == Finding::Level::attention);
    CHECK(find(findings, "latgovd")->result ==
          "status unreadable: Failed to parse /run/latgov/status.json: not a JSON object");
}

TEST_CASE("on the live host /proc/mounts unread is still a fix") {
    auto facts = healthy();
    facts.run_fstype.clear();
    const auto findings = diagnose(facts);
    CHECK(find(findings, "/run")->result == "file system unknown");
    CHECK(find(findings, "/run")->level == Finding::Level::attention);
    CHECK(find(findings, "latgovd")->result == "running (status file found)");
}

TEST_CASE("latgov's own global hold is not another holder") {
    auto facts = healthy();
    facts.cpu_dma_latency = 0;
    facts.latgov_global_limit = 0;
    CHECK(find(diagnose(facts), "/dev/cpu_dma_latency")->level == Finding::Level::ok);
}

TEST_CASE("the mount that holds a path: the longest prefix, the last of stacked ones") {
    const std::string mounts = "/dev/vda1 / ext4 rw 0 0\ntmpfs /run tmpfs rw 0 0\n"
                               "tmpfs /run/lock tmpfs rw 0 0\n/dev/vdb /runner xfs rw 0 0\n"
                               "overlay /run overlay rw 0 0\n";
    CHECK(mount_fstype(mounts, "/run") == "overlay");
    CHECK(mount_fstype(mounts, "/run/latgov") == "overlay");
    CHECK(mount_fstype(mounts, "/var") == "ext4");
    CHECK(mount_fstype("", "/run").empty());
}

TEST_CASE("explain names an unknown device as an error") {
    Topology topology;
    Config config;
    std::map<int, std::vector<IdleCost>> costs;
    nlohmann::json status;
    auto text = explain_device({topology, config, costs, "declared", status}, "nvme9n9");
    REQUIRE_FALSE(text);
    CHECK(text.error().message.find("nvme9n9") != std::string::npos);
}

TEST_CASE("explain reads the live limit, its source, linger and who is held from the status") {
    const Topology topology = virtio_machine("haltpoll", "haltpoll");
    const Config config;
    std::map<int, std::vector<IdleCost>> costs;
    for (int cpu : {0, 1})
        costs[cpu] = {{"POLL", 0, 0, false}, {"C1", 1, 1, false}};
    const auto status = nlohmann::json::parse(R"({
        "devices": [{"name": "vda", "limit_us": 0, "limit_from": "evidence: holding helps",
                     "linger_ms": 7, "observed_latency_us": 120.0, "active_queues": [0]}],
        "cpus": [{"cpu": 0, "limit_us": 0, "held_for": [{"device": "vda", "queue": 0,
                  "why": "waits"}]},
                 {"cpu": 1, "limit_us": null, "held_for": []}]})");
    auto text = explain_device({topology, config, costs, "declared", status}, "vda");
    REQUIRE(text);
    CHECK(text->find("Limit chosen now: 0 us (poll only) (evidence: "
                     "holding helps).") != std::string::npos);
    CHECK(text->find("stays active 7 ms after its last IO now (linger_ms auto") !=
          std::string::npos);
    CHECK(text->find("waiter_cpus") != std::string::npos);
    CHECK(text->find("held now at 0 us (poll only) for vda/0 (waits)") != std::string::npos);
}
