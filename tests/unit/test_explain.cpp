// `latgov explain` on plain structs: a status file that is not what latgovd
// writes, and the linger it describes.
#include "latgov/explain.hpp"
#include "latgov/governor.hpp"
#include "machines.hpp"

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>
#include <string>

using namespace latgov;
using namespace std::chrono_literals;

namespace {

// What latgovd writes for vda on virtio_machine, limited to what explain reads.
nlohmann::json valid_status() {
    return nlohmann::json::parse(R"({
        "devices": [{"name": "vda", "limit_us": 0, "limit_from": "evidence: holding helps",
                     "linger_ms": 7, "observed_latency_us": 120.0, "active_queues": [0]}],
        "cpus": [{"cpu": 0, "limit_us": 0, "held_for": [{"device": "vda", "queue": 0,
                  "why": "waits"}]},
                 {"cpu": 1, "limit_us": null, "held_for": []}]})");
}

struct Machine {
    Topology topology = virtio_machine("haltpoll", "haltpoll");
    std::map<int, std::vector<IdleCost>> costs{{0, {{"POLL", 0, 0, false}, {"C1", 1, 1, false}}},
                                               {1, {{"POLL", 0, 0, false}, {"C1", 1, 1, false}}}};

    Result<std::string> explain(const Config& config, const nlohmann::json& status) const {
        return explain_device({topology, config, costs, "declared", status}, "vda");
    }
};

// A configuration of the test's own; the test stops if it does not parse.
Config config_of(const std::string& text) {
    auto config = parse_config(text, "t.toml");
    REQUIRE(config);
    return *config;
}

bool contains(const std::string& text, const std::string& what) {
    return text.find(what) != std::string::npos;
}

} // namespace

TEST_CASE("explain: a status that is not what latgovd writes is an error naming the field") {
    const Machine machine;
    const Config config;
    REQUIRE(machine.explain(config, valid_status()));

    struct Case {
        const char* pointer; // the field changed, as a JSON pointer
        nlohmann::json value;
        const char* error;
    };
    const Case cases[] = {
        {"/devices/0/name", 5, "devices[0].name: expected a string, got 5"},
        {"/devices/0/active_queues", "0", "devices[0].active_queues: expected an array, got \"0\""},
        {"/devices/0/active_queues/0", 3000000000,
         "devices[0].active_queues[0]: must be in -2147483648..2147483647, got 3000000000"},
        {"/devices/0/limit_us", -1, "devices[0].limit_us: must be in 0..4294967295, got -1"},
        {"/devices/0/linger_ms", 7.5, "devices[0].linger_ms: expected a whole number, got 7.5"},
        {"/devices/0/observed_latency_us", "fast",
         "devices[0].observed_latency_us: expected a number, got \"fast\""},
        {"/cpus/0/cpu", 1e84, "cpus[0].cpu: expected a whole number, got 1e+84"},
        {"/cpus/0/limit_us", 4294967296,
         "cpus[0].limit_us: must be in 0..4294967295, got 4294967296"},
        {"/cpus/0/held_for/0/queue", 0.5,
         "cpus[0].held_for[0].queue: expected a whole number, got 0.5"},
        {"/cpus/0/held_for/0", "vda/0", "cpus[0].held_for[0]: expected an object, got \"vda/0\""},
        {"/cpus/1", nullptr, "cpus[1]: expected an object, got null"},
        // What a dry-run device would hold: both fields, or neither.
        {"/cpus/1/dry_run_limit_us", "20",
         "cpus[1].dry_run_limit_us: expected a whole number, got \"20\""},
        {"/cpus/1/dry_run_limit_us", -5,
         "cpus[1].dry_run_limit_us: must be in 0..4294967295, got -5"},
        {"/cpus/1",
         {{"cpu", 1},
          {"limit_us", nullptr},
          {"held_for", nlohmann::json::array()},
          {"dry_run_limit_us", 20}},
         "cpus[1].dry_run_for: missing"},
        {"/cpus/1",
         {{"cpu", 1},
          {"limit_us", nullptr},
          {"held_for", nlohmann::json::array()},
          {"dry_run_limit_us", 20},
          {"dry_run_for", "vda/0"}},
         "cpus[1].dry_run_for: expected an array, got \"vda/0\""},
        {"/cpus/1",
         {{"cpu", 1},
          {"limit_us", nullptr},
          {"held_for", nlohmann::json::array()},
          {"dry_run_limit_us", 20},
          {"dry_run_for", {{{"device", "vda"}, {"queue", "0"}}}}},
         "cpus[1].dry_run_for[0].queue: expected a whole number, got \"0\""},
    };
    for (const auto& c : cases) {
        INFO(std::string(c.pointer));
        auto status = valid_status();
        status[nlohmann::json::json_pointer(c.pointer)] = c.value;
        const auto text = machine.explain(config, status);
        REQUIRE_FALSE(text);
        CHECK(text.error().message == std::string("Failed to read latgovd's status: ") + c.error);
    }

    // A key latgovd always writes, missing.
    struct Missing {
        const char* pointer;
        const char* path; // as the error names it
    };
    const Missing missing[] = {
        {"/devices/0/limit_us", "devices[0].limit_us"},
        {"/devices/0/active_queues", "devices[0].active_queues"},
        {"/cpus/0/cpu", "cpus[0].cpu"},
        {"/cpus/0/held_for", "cpus[0].held_for"},
        {"/cpus/0/held_for/0/device", "cpus[0].held_for[0].device"},
        {"/cpus", "cpus"},
    };
    for (const auto& m : missing) {
        INFO(std::string(m.pointer));
        auto status = valid_status();
        const nlohmann::json::json_pointer field(m.pointer);
        status[field.parent_pointer()].erase(field.back());
        const auto text = machine.explain(config, status);
        REQUIRE_FALSE(text);
        CHECK(text.error().message ==
              std::string("Failed to read latgovd's status: ") + m.path + ": missing");
    }

    // Not even an object.
    const auto text = machine.explain(config, nlohmann::json::array());
    REQUIRE_FALSE(text);
    CHECK(text.error().message == "Failed to read latgovd's status: expected an object, got []");
}

TEST_CASE("explain: fields latgovd may leave empty are optional, and null is not running") {
    const Machine machine;
    const Config config;
    auto status = valid_status();
    status["devices"][0].erase("limit_from");
    status["devices"][0]["linger_ms"] = nullptr;
    status["devices"][0]["observed_latency_us"] = nullptr;
    status["devices"][0]["limit_us"] = nullptr;
    status["cpus"][0]["held_for"][0].erase("why");
    auto text = machine.explain(config, status);
    REQUIRE(text);
    CHECK(contains(*text, "No latency observed yet"));
    CHECK(contains(*text, "Limit chosen now: no limit.\n"));
    CHECK(contains(*text, "held now at 0 us (poll only) for vda/0\n"));

    text = machine.explain(config, nullptr);
    REQUIRE(text);
    CHECK(contains(*text, "latgovd is not running"));
}

TEST_CASE("explain: a field read from the system stays on its line and in its column") {
    Machine machine;
    machine.topology.devices[0].model = "QEMU\nHARDDISK\x1b[2J";
    machine.topology.devices[0].transport = "vir\ntio";
    machine.topology.devices[0].queues[0].irq_name = "virtio1\nreq.0";
    machine.costs[1][1].name = "C1\tE";
    const auto text = machine.explain(Config{}, valid_status());
    REQUIRE(text);
    CHECK(text->substr(0, text->find('\n')) ==
          "vda: virtio-blk QEMU?HARDDISK?[2J, transport vir?tio");
    CHECK(contains(*text, "virtio1?req.0 "));
    CHECK(contains(*text, "  C1?E "));
    CHECK_FALSE(contains(*text, "\t"));
}

TEST_CASE("explain: a CPU a dry-run device would hold says at what and for what") {
    const Machine machine;
    auto config = config_of("[[device]]\nname = \"vda\"\nbackend = \"dry-run\"\n");
    // What latgovd writes under dry-run: nothing held, the would-be limits
    // beside. CPU 0 is only a waiter, so only dry_run_for names it.
    auto status = nlohmann::json::parse(R"({
        "devices": [{"name": "vda", "limit_us": 20, "active_queues": [0]}],
        "cpus": [{"cpu": 0, "limit_us": null, "held_for": [], "dry_run_limit_us": 20,
                  "dry_run_for": [{"device": "vda", "queue": 0, "why": "waits"}]},
                 {"cpu": 1, "limit_us": null, "held_for": [], "dry_run_limit_us": 20,
                  "dry_run_for": [{"device": "vda", "queue": 0, "why": "completes"}]}]})");
    auto text = machine.explain(config, status);
    REQUIRE(text);
    INFO(*text);
    CHECK(contains(*text, "(mode auto, backend dry-run)"));
    const auto cpu0 = text->find("\nCPU 0 idle states:\n");
    const auto cpu1 = text->find("\nCPU 1 idle states:\n");
    REQUIRE(cpu0 != std::string::npos);
    REQUIRE(cpu1 != std::string::npos);
    CHECK(text->substr(cpu0, cpu1 - cpu0)
              .ends_with("  would hold at 20 us (dry-run) for vda/0 (waits)\n"));
    CHECK(text->substr(cpu1).ends_with("  would hold at 20 us (dry-run) for vda/0 (completes)\n"));
    CHECK_FALSE(contains(*text, "held now"));

    // A CPU held for one device and that a dry-run device would hold too
    // says both.
    status["cpus"][1]["limit_us"] = 0;
    status["cpus"][1]["held_for"] = {{{"device", "vdb"}, {"queue", 2}, {"why", "completes"}}};
    text = machine.explain(config, status);
    REQUIRE(text);
    CHECK(contains(*text, "  held now at 0 us (poll only) for vdb/2 (completes)\n  would hold at "
                          "20 us (dry-run) for vda/0 (completes)\n"));
    CHECK_FALSE(contains(*text, "not held now"));
}

TEST_CASE("explain: the global request holds every CPU, and explain says so") {
    const Machine machine;
    auto config = config_of("[[device]]\nname = \"vda\"\nmode = \"fixed\"\nlimit_us = "
                            "5\nbackend = \"global\"\n");
    // What latgovd writes with a global device active: no per-CPU hold, the
    // global one beside.
    auto status = nlohmann::json::parse(R"({
        "devices": [{"name": "vda", "limit_us": 5, "active_queues": [0]}],
        "cpus": [{"cpu": 0, "limit_us": null, "held_for": []},
                 {"cpu": 1, "limit_us": null, "held_for": []}],
        "global_limit_us": 5,
        "global_held_for": [{"device": "vda", "queue": 0, "why": "completes"}]})");
    auto text = machine.explain(config, status);
    REQUIRE(text);
    INFO(*text);
    CHECK(contains(*text, "Mode fixed: while a queue is active every CPU holds 5 us (backend "
                          "global: /dev/cpu_dma_latency).\n"));
    CHECK(contains(*text, "\nCPU 1 idle states:\n"));
    CHECK(text->ends_with(
        "  held now at 5 us through /dev/cpu_dma_latency (every CPU) for vda/0 (completes)\n"));
    CHECK_FALSE(contains(*text, "not held now"));

    // Released: nothing held anywhere.
    status["global_limit_us"] = nullptr;
    status["global_held_for"] = nlohmann::json::array();
    text = machine.explain(config, status);
    REQUIRE(text);
    CHECK(text->ends_with("  not held now\n"));
    CHECK_FALSE(contains(*text, "cpu_dma_latency) for"));
}

TEST_CASE("explain: a status that does not list a governed device does not say latgovd is "
          "not running") {
    // latgovd runs with another configuration than the one explain reads
    // (edited, not reloaded): its status lists other devices.
    const Machine machine;
    const Config config;
    auto status = valid_status();
    status["devices"][0]["name"] = "vdb";
    auto text = machine.explain(config, status);
    REQUIRE(text);
    INFO(*text);
    CHECK(contains(*text, "latgovd's status does not list this device"));
    CHECK_FALSE(contains(*text, "latgovd is not running"));
}

TEST_CASE("explain: a device with only poll queues is not governed, and says why") {
    Machine machine;
    for (auto& q : machine.topology.devices.at(0).queues) {
        q.type = QueueType::poll;
        q.irq.reset();
        q.completion_cpus.clear();
        q.completion_source = CompletionSource::none;
    }
    Config config;
    DeviceRule rule;
    rule.match.name = "vda";
    config.devices.push_back(rule);
    const auto text = machine.explain(config, nullptr);
    REQUIRE(text);
    CHECK(contains(*text, "Not governed: every hardware queue of it is a poll queue"));
    CHECK_FALSE(contains(*text, "no [[device]] entry names it"));
}

TEST_CASE("explain: linger_ms auto falls back to 3 ms whatever number the defaults table gave") {
    const Machine machine;
    auto config = config_of("[defaults]\nlinger_ms = 50\n[[device]]\nname = \"vda\"\n"
                            "linger_ms = \"auto\"\n");

    // What latgovd uses: no gap seen yet, so the fallback.
    const Governor governor(machine.topology, config, machine.costs);
    REQUIRE(governor.devices().size() == 1);
    CHECK(governor.linger_of(governor.devices()[0]) == 3ms);

    // What explain says it uses, with latgovd running and without.
    auto text = machine.explain(config, valid_status());
    REQUIRE(text);
    CHECK(contains(*text, "A queue stays active 7 ms after its last IO now (linger_ms auto: twice "
                          "the mean gap between requests under 10 ms, else 3 ms).\n"));
    text = machine.explain(config, nullptr);
    REQUIRE(text);
    CHECK(contains(*text, "A queue stays active after its last IO for twice the mean gap between "
                          "requests when that is under 10 ms, else 3 ms (linger_ms auto).\n"));
    CHECK_FALSE(contains(*text, "50 ms"));

    // A number on the device itself is that number.
    config = config_of("[defaults]\nlinger_ms = \"auto\"\n[[device]]\nname = \"vda\"\n"
                       "linger_ms = 50\n");
    text = machine.explain(config, nullptr);
    REQUIRE(text);
    CHECK(contains(*text, "A queue stays active 50 ms after its last IO (linger_ms).\n"));
}

TEST_CASE("explain: completion CPUs taken from smp_affinity_list say so") {
    Machine machine;
    const Config config;
    auto text = machine.explain(config, nullptr);
    REQUIRE(text);
    CHECK_FALSE(contains(*text, "smp_affinity_list"));

    // A kernel without effective_affinity_list: discovery took the IRQ's
    // affinity instead.
    auto& q = machine.topology.devices[0].queues[0];
    q.irq_affinity = {0, 1};
    q.completion_cpus = {0, 1};
    q.completion_source = CompletionSource::irq_affinity;
    text = machine.explain(config, nullptr);
    REQUIRE(text);
    CHECK(contains(*text, "0      virtio1-req.0    0-1           ?\n"));
    CHECK(contains(*text, "COMPLETES ON is the IRQ's smp_affinity_list (online CPUs)"));
}

TEST_CASE("explain: a name rule for a multipath namespace governs its paths, and one that "
          "matches nothing is flagged") {
    Topology topology = virtio_machine();
    // nvme1n1 over one path, nvme1c0n1, whose IRQ completes on CPU 0.
    BlockDevice head;
    head.name = "nvme1n1";
    head.dev = "259:1";
    head.kind = DeviceKind::nvme_multipath_head;
    head.paths = {"nvme1c0n1"};
    BlockDevice path;
    path.name = "nvme1c0n1";
    path.kind = DeviceKind::nvme;
    path.hidden = true;
    path.controller = "nvme0";
    path.multipath_head = "nvme1n1";
    path.transport = "pcie";
    HardwareQueue q;
    q.irq = 40;
    q.irq_name = "nvme0q1";
    q.submit_cpus = q.completion_cpus = {0, 1};
    q.completion_source = CompletionSource::irq_effective_affinity;
    path.queues = {q};
    topology.devices.push_back(head);
    topology.devices.push_back(path);
    const std::map<int, std::vector<IdleCost>> costs{{0, {{"POLL", 0, 0, false}}},
                                                     {1, {{"POLL", 0, 0, false}}}};
    // vda is turned off by its rule: matched all the same, not flagged.
    auto config = config_of("[[device]]\nname = \"nvme1n1\"\nmode = \"fixed\"\nlimit_us = 5\n\n"
                            "[[device]]\nname = \"nvme7n1\"\nmode = \"fixed\"\nlimit_us = 9\n\n"
                            "[[device]]\nname = \"vd?\"\nmode = \"off\"\n");
    const auto text =
        explain_device({topology, config, costs, "declared", nlohmann::json()}, "nvme1c0n1");
    REQUIRE(text);
    INFO(*text);
    CHECK(contains(*text, "Governed by t.toml:1:1 (mode fixed"));
    CHECK(contains(*text, "Warning: t.toml:6:1: [[device]] name = \"nvme7n1\" matches no "
                          "block device."));
    CHECK_FALSE(contains(*text, "name = \"nvme1n1\" matches no"));
    CHECK_FALSE(contains(*text, "name = \"vd?\" matches no"));
}

TEST_CASE("explain: a CPU whose idle table could not be read says so, not \"no cpuidle "
          "driver\"") {
    Machine machine;
    machine.topology.cpus[1].idle_states = {};
    machine.topology.cpus[1].idle_states_known = false;
    machine.costs.erase(1);
    const auto text = machine.explain(Config{}, nlohmann::json());
    REQUIRE(text);
    INFO(*text);
    CHECK(contains(*text, "CPU 1: idle states unknown"));
    CHECK_FALSE(contains(*text, "CPU 1: no idle states"));
}
