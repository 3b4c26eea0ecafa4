// `latgov doctor`: the checks over plain facts, and the facts read from a tree.
#include "latgov/cli_host.hpp"
#include "latgov/doctor.hpp"
#include "latgov/explain.hpp"

#include <doctest/doctest.h>
#include <filesystem>
#include <fstream>
#include <unistd.h>

using namespace latgov;
namespace fs = std::filesystem;

namespace {

HostFacts healthy() {
    HostFacts f;
    f.cpuidle_driver = "intel_idle";
    f.cpuidle_governor = "menu";
    f.cpu_dma_latency_known = true;
    f.latgov_running = true;
    f.cpu_values = {{0, std::nullopt}, {1, std::uint32_t{0}}};
    f.latgov_held_cpus = {1};
    f.tracefs_events = true;
    f.debugfs_block = true;
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

TEST_CASE("a healthy host needs no attention; latgov's own holds are not someone else's") {
    const auto findings = diagnose(healthy());
    CHECK_FALSE(needs_attention(findings));
    CHECK(find(findings, "per-CPU pm_qos_resume_latency_us")->level == Finding::Level::ok);
    CHECK(format_findings(findings).find("FIX") == std::string::npos);
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
        {"tracefs", [](HostFacts& f) { f.tracefs_events = false; }},
        {"/run", [](HostFacts& f) { f.run_fstype = "ext4"; }},
        {"queue IRQs on isolated CPUs",
         [](HostFacts& f) {
             f.isolated_cpus = {3};
             f.irqs_by_cpu[3] = {"nvme0q4"};
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

TEST_CASE("latgov's own global hold is not another holder") {
    auto facts = healthy();
    facts.cpu_dma_latency = 0;
    facts.latgov_global_limit = 0;
    CHECK(find(diagnose(facts), "/dev/cpu_dma_latency")->level == Finding::Level::ok);
}

TEST_CASE("facts from a tree: /run's mount, isolated CPUs, APST, tracefs") {
    char pattern[] = "/tmp/latgov-doctor.XXXXXX";
    const fs::path root = ::mkdtemp(pattern);
    auto put = [&](const std::string& path, const std::string& text) {
        fs::create_directories((root / path.substr(1)).parent_path());
        std::ofstream(root / path.substr(1)) << text;
    };
    put("/proc/mounts", "/dev/vda1 / ext4 rw 0 0\ntmpfs /run tmpfs rw 0 0\n"
                        "tmpfs /run/lock tmpfs rw 0 0\n");
    put("/sys/devices/system/cpu/isolated", "2-3\n");
    put("/sys/module/nvme_core/parameters/default_ps_max_latency_us", "100000\n");
    put("/sys/kernel/tracing/events/block/block_rq_issue/id", "1234\n");
    Topology topology;
    BlockDevice disk;
    disk.name = "nvme0n1";
    HardwareQueue q;
    q.irq = 40;
    q.irq_name = "nvme0q3";
    q.completion_cpus = {2};
    disk.queues.push_back(q);
    topology.devices.push_back(disk);
    const auto facts = read_host_facts(SysRoot(root), topology, nullptr);
    CHECK(facts.run_fstype == "tmpfs");
    CHECK(facts.isolated_cpus == std::set<int>{2, 3});
    CHECK(facts.nvme_ps_max_latency_us == 100000);
    CHECK(facts.tracefs_events);
    CHECK_FALSE(facts.debugfs_block);
    CHECK_FALSE(facts.latgov_running);
    CHECK(facts.irqs_by_cpu.at(2) == std::vector<std::string>{"nvme0q3"});
    CHECK(find(diagnose(facts), "queue IRQs on isolated CPUs")->level == Finding::Level::attention);
    fs::remove_all(root);
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

TEST_CASE("latgov status names the limits others hold, not latgov's own") {
    char pattern[] = "/tmp/latgov-holders.XXXXXX";
    const fs::path root = ::mkdtemp(pattern);
    auto put = [&](const std::string& path, const std::string& text) {
        fs::create_directories((root / path.substr(1)).parent_path());
        std::ofstream(root / path.substr(1), std::ios::binary) << text;
    };
    const std::int32_t twenty = 20;
    put("/dev/cpu_dma_latency", std::string(reinterpret_cast<const char*>(&twenty), 4));
    put("/sys/devices/system/cpu/cpu0/power/pm_qos_resume_latency_us", "100\n");
    put("/sys/devices/system/cpu/cpu1/power/pm_qos_resume_latency_us", "n/a\n");
    put("/sys/devices/system/cpu/cpu2/power/pm_qos_resume_latency_us", "0\n");
    auto status = nlohmann::json::parse(R"({"global_limit_us": null, "cpus": [
        {"cpu": 0, "limit_us": null}, {"cpu": 1, "limit_us": 0}, {"cpu": 2, "limit_us": null}]})");
    CHECK(format_other_holders(root.string(), status) ==
          "other holders (kept, not governed by latgov): /dev/cpu_dma_latency 20 us, cpu0 100\n");
    status["global_limit_us"] = 20; // latgov's own request
    status["cpus"][0]["limit_us"] = 100;
    CHECK(format_other_holders(root.string(), status) == "other holders: none\n");
    fs::remove_all(root);
}
