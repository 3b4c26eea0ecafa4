#include "latgov/config.hpp"

#include <doctest/doctest.h>
#include <filesystem>
#include <fstream>
#include <sstream>

#ifndef LATGOV_SOURCE_DIR
#error "LATGOV_SOURCE_DIR must name the source tree (it holds config/latgov.toml)"
#endif

using namespace latgov;
using namespace std::chrono_literals;
namespace fs = std::filesystem;

namespace {

// The message parse_config gives for a document it must reject.
std::string error_of(std::string_view text) {
    auto config = parse_config(text, "t.toml");
    REQUIRE_FALSE(config.ok());
    return config.error().message;
}

Config parsed(std::string_view text) {
    auto config = parse_config(text, "t.toml");
    INFO((config.ok() ? std::string() : config.error().message));
    REQUIRE(config.ok());
    return *config;
}

std::string read_file(const fs::path& path) {
    std::ifstream in(path);
    REQUIRE(in);
    std::ostringstream text;
    text << in.rdbuf();
    return text.str();
}

const fs::path example_config = fs::path(LATGOV_SOURCE_DIR) / "config" / "latgov.toml";

} // namespace

TEST_CASE("default_config holds the documented defaults") {
    const Config config = default_config();
    CHECK(config.daemon.sample_interval == 5ms);
    CHECK(config.daemon.idle_interval == 50ms);
    CHECK(config.daemon.status_interval == 1000ms);
    CHECK(config.daemon.runtime_dir == "/run/latgov");
    CHECK(config.daemon.calibration_file == "/var/lib/latgov/calibration.toml");
    CHECK(config.daemon.log_level == "info");
    CHECK(to_string(config.defaults.mode) == "auto");
    CHECK(to_string(config.defaults.backend) == "percpu");
    CHECK(config.defaults.limit_us == 0);
    CHECK(config.defaults.latency_fraction == 0.1);
    CHECK(config.defaults.min_limit_us == 0);
    CHECK_FALSE(config.defaults.max_limit_us.has_value());
    CHECK(config.defaults.linger == 3ms);
    CHECK(config.defaults.min_samples == 16);
    CHECK(config.devices.empty());
}

TEST_CASE("parse_config reads every key") {
    const Config config = parsed(R"([daemon]
sample_interval_ms = 2
steady_interval_ms = 7
idle_interval_ms = 100
status_interval_ms = 500
runtime_dir = "/tmp/latgov"
calibration_file = "/tmp/cal.toml"
log_level = "debug"
io_events = false
calibrate_on_start = true
queue_inflight = true

[defaults]
mode = "fixed"
backend = "dry-run"
limit_us = 20
latency_fraction = 0.25
min_limit_us = 5
max_limit_us = 300
linger_ms = 0
min_samples = 4

[[device]]
name = "nvme*"
model = "Samsung*"
serial = "S4EW"
wwid = "eui.01"
transport = "pcie"
mode = "off"
backend = "global"
limit_us = 7
latency_fraction = 1
min_limit_us = 1
max_limit_us = 2
linger_ms = 9
min_samples = 100
)");
    CHECK(config.daemon.sample_interval == 2ms);
    CHECK(config.daemon.steady_interval == 7ms);
    CHECK(config.daemon.idle_interval == 100ms);
    CHECK(config.daemon.status_interval == 500ms);
    CHECK(config.daemon.runtime_dir == "/tmp/latgov");
    CHECK(config.daemon.calibration_file == "/tmp/cal.toml");
    CHECK(config.daemon.log_level == "debug");
    CHECK_FALSE(config.daemon.io_events);
    CHECK(config.daemon.calibrate_on_start);
    CHECK(config.daemon.queue_inflight);

    CHECK(config.defaults.mode == Mode::fixed);
    CHECK(config.defaults.backend == Backend::dry_run);
    CHECK(config.defaults.limit_us == 20);
    CHECK(config.defaults.latency_fraction == 0.25);
    CHECK(config.defaults.min_limit_us == 5);
    CHECK(config.defaults.max_limit_us == 300u);
    CHECK(config.defaults.linger == 0ms);
    CHECK(config.defaults.min_samples == 4);

    REQUIRE(config.devices.size() == 1);
    const DeviceRule& rule = config.devices[0];
    CHECK(rule.match.name == "nvme*");
    CHECK(rule.match.model == "Samsung*");
    CHECK(rule.match.serial == "S4EW");
    CHECK(rule.match.wwid == "eui.01");
    CHECK(rule.match.transport == "pcie");
    CHECK(rule.mode == Mode::off);
    CHECK(rule.backend == Backend::global);
    CHECK(rule.limit_us == 7u);
    CHECK(rule.latency_fraction == 1.0); // an integer is a valid fraction
    CHECK(rule.min_limit_us == 1u);
    CHECK(rule.max_limit_us == 2u);
    CHECK(rule.linger == 9ms);
    CHECK(rule.min_samples == 100u);
    CHECK(rule.origin == "t.toml:23:1");
    CHECK(config.sources == std::vector<fs::path>{"t.toml"});
}

TEST_CASE("a device table entry keeps only the keys it sets") {
    const Config config = parsed("[[device]]\nname = \"vd*\"\n\n[[device]]\nserial = \"X\"\n");
    REQUIRE(config.devices.size() == 2);
    CHECK(config.devices[0].origin == "t.toml:1:1");
    CHECK(config.devices[1].origin == "t.toml:4:1");
    CHECK_FALSE(config.devices[0].mode.has_value());
    CHECK_FALSE(config.devices[0].limit_us.has_value());
    CHECK_FALSE(config.devices[0].max_limit_us.has_value());
}

TEST_CASE("mode = fixed without limit_us holds 0") {
    const Config config = parsed("[defaults]\nmode = \"fixed\"\n");
    CHECK(config.defaults.mode == Mode::fixed);
    CHECK(config.defaults.limit_us == 0);
}

TEST_CASE("a TOML syntax error names file, line and column") {
    CHECK(error_of("[daemon]\nsample_interval_ms = \n") ==
          "t.toml:2:1: syntax error: missing value after key-value separator '='");
    CHECK(error_of("[daemon]\n[daemon]\n") ==
          "t.toml:2:1: syntax error: table (\"daemon\") already exists.");
}

TEST_CASE("unknown keys are rejected in every table and at the top level") {
    CHECK(error_of("[daemon]\nsample_ms = 5\n") == "t.toml:2:13: [daemon] sample_ms: unknown key");
    CHECK(error_of("[defaults]\nfraction = 0.5\n") ==
          "t.toml:2:12: [defaults] fraction: unknown key");
    CHECK(error_of("[[device]]\nname = \"vd*\"\nlimit = 3\n") ==
          "t.toml:3:9: [[device]] limit: unknown key");
    CHECK(error_of("verbose = true\n") ==
          "t.toml:1:11: verbose: unknown key; expected [daemon], [defaults] or [[device]]");
    CHECK(error_of("[daemons]\nlog_level = \"info\"\n") ==
          "t.toml:1:1: daemons: unknown key; expected [daemon], [defaults] or [[device]]");
}

TEST_CASE("a value of the wrong type is rejected, not defaulted") {
    CHECK(error_of("[daemon]\nsample_interval_ms = \"5\"\n") ==
          "t.toml:2:22: [daemon] sample_interval_ms: must be an integer, got string");
    CHECK(error_of("[defaults]\nlimit_us = 2.5\n") ==
          "t.toml:2:12: [defaults] limit_us: must be an integer, got float");
    CHECK(error_of("[defaults]\nlatency_fraction = \"0.1\"\n") ==
          "t.toml:2:20: [defaults] latency_fraction: must be a number, got string");
    CHECK(error_of("[defaults]\nmode = 1\n") ==
          "t.toml:2:8: [defaults] mode: must be a string, got integer");
    CHECK(error_of("[[device]]\nserial = 1234\n") ==
          "t.toml:2:10: [[device]] serial: must be a string, got integer");
    CHECK(error_of("daemon = 5\n") == "t.toml:1:10: [daemon]: must be a table, got integer");
    CHECK(error_of("[device]\nname = \"vd*\"\n") ==
          "t.toml:1:1: [[device]]: must be an array of tables, got table");
    CHECK(error_of("device = [1]\n") == "t.toml:1:11: [[device]]: must be a table, got integer");
}

TEST_CASE("a value out of range is rejected") {
    CHECK(error_of("[defaults]\nlatency_fraction = 1.5\n") ==
          "t.toml:2:20: [defaults] latency_fraction: must be > 0 and <= 1, got 1.5");
    CHECK(error_of("[defaults]\nlatency_fraction = 0\n") ==
          "t.toml:2:20: [defaults] latency_fraction: must be > 0 and <= 1, got 0");
    CHECK(error_of("[defaults]\nlatency_fraction = nan\n") ==
          "t.toml:2:20: [defaults] latency_fraction: must be > 0 and <= 1, got nan");
    CHECK(error_of("[daemon]\nsample_interval_ms = 0\n") ==
          "t.toml:2:22: [daemon] sample_interval_ms: must be in 1..1000, got 0");
    CHECK(error_of("[defaults]\nlinger_ms = -1\n") ==
          "t.toml:2:13: [defaults] linger_ms: must be in 0..60000, got -1");
    // Beyond 64 bits the TOML library gives the nearest 64-bit number, which
    // the file does not hold.
    CHECK(error_of("[daemon]\nsample_interval_ms = 18446744073709551617\n") ==
          "t.toml:2:22: [daemon] sample_interval_ms: must be in 1..1000, got "
          "9223372036854775807 or more");
    CHECK(error_of("[defaults]\nlinger_ms = -18446744073709551617\n") ==
          "t.toml:2:13: [defaults] linger_ms: must be in 0..60000, got -9223372036854775808 or "
          "less");
    CHECK(error_of("[[device]]\nname = \"vd*\"\nlimit_us = 2000000001\n") ==
          "t.toml:3:12: [[device]] limit_us: must be in 0..2000000000, got 2000000001");
    CHECK(error_of("[daemon]\nruntime_dir = \"run/latgov\"\n") ==
          "t.toml:2:15: [daemon] runtime_dir: must be an absolute path, got \"run/latgov\"");
    CHECK(error_of("[[device]]\nname = \"\"\n") ==
          "t.toml:2:8: [[device]] name: must not be empty");
}

TEST_CASE("metrics_file: a path, or \"\" for no metrics even where the default's directory is") {
    const Config none = parsed("[daemon]\nmetrics_file = \"\"\n");
    CHECK(none.daemon.metrics_file.empty());
    CHECK(none.daemon.metrics_file_configured);

    const Config path = parsed("[daemon]\nmetrics_file = \"/tmp/latgov.prom\"\n");
    CHECK(path.daemon.metrics_file == "/tmp/latgov.prom");
    CHECK(path.daemon.metrics_file_configured);

    const Config unset = parsed("[daemon]\n");
    CHECK(unset.daemon.metrics_file == default_metrics_file);
    CHECK_FALSE(unset.daemon.metrics_file_configured);

    // A drop-in turns off the metrics a file before it set.
    const ConfigText layers[] = {{"[daemon]\nmetrics_file = \"/tmp/latgov.prom\"\n", "main.toml"},
                                 {"[daemon]\nmetrics_file = \"\"\n", "10-off.toml"}};
    auto layered = parse_config_layers(layers);
    REQUIRE(layered.ok());
    CHECK(layered->daemon.metrics_file.empty());
    CHECK(layered->daemon.metrics_file_configured);

    CHECK(error_of("[daemon]\nmetrics_file = \"latgov.prom\"\n") ==
          "t.toml:2:16: [daemon] metrics_file: must be an absolute path or \"\" (none), got "
          "\"latgov.prom\"");
    CHECK(error_of("[daemon]\nmetrics_file = 0\n") ==
          "t.toml:2:16: [daemon] metrics_file: must be a string, got integer");
    // The other string keys still refuse "".
    CHECK(error_of("[daemon]\nruntime_dir = \"\"\n") ==
          "t.toml:2:15: [daemon] runtime_dir: must not be empty");
    CHECK(error_of("[daemon]\nevidence_file = \"\"\n") ==
          "t.toml:2:17: [daemon] evidence_file: must not be empty");
    CHECK(error_of("[[device]]\nserial = \"\"\n") ==
          "t.toml:2:10: [[device]] serial: must not be empty");
}

TEST_CASE("an unknown enum string lists the valid ones") {
    CHECK(error_of("[defaults]\nmode = \"fast\"\n") ==
          "t.toml:2:8: [defaults] mode: must be one of auto, fixed, off; got \"fast\"");
    CHECK(error_of("[[device]]\nname = \"vd*\"\nbackend = \"dry_run\"\n") ==
          "t.toml:3:11: [[device]] backend: must be one of percpu, global, dry-run; got "
          "\"dry_run\"");
    CHECK(error_of("[daemon]\nio_events = 1\n") ==
          "t.toml:2:13: [daemon] io_events: must be a boolean, got integer");
    CHECK(error_of("[daemon]\nlog_level = \"verbose\"\n") ==
          "t.toml:2:13: [daemon] log_level: must be one of trace, debug, info, warn, error; got "
          "\"verbose\"");
}

TEST_CASE("a device table entry without a matcher is rejected at its header") {
    CHECK(error_of("[[device]]\nname = \"vd*\"\n\n[[device]]\nmode = \"off\"\n") ==
          "t.toml:4:1: [[device]]: needs at least one of name, model, serial, wwid, transport");
}

TEST_CASE("max_limit_us below min_limit_us is rejected") {
    CHECK(error_of("[defaults]\nmin_limit_us = 50\nmax_limit_us = 10\n") ==
          "t.toml:3:16: [defaults] max_limit_us: must be >= min_limit_us (50), got 10");
    CHECK(error_of("[[device]]\nname = \"a\"\nmax_limit_us = 1\nmin_limit_us = 2\n") ==
          "t.toml:3:16: [[device]] max_limit_us: must be >= min_limit_us (2), got 1");
    // Completed from [defaults], whatever their place in the file.
    CHECK(
        error_of("[[device]]\nname = \"a\"\nmin_limit_us = 20\n[defaults]\nmax_limit_us = 10\n") ==
        "t.toml:3:16: [[device]] min_limit_us: must be <= max_limit_us (10), got 20");
}

TEST_CASE("of several errors the first in the file is reported") {
    CHECK(error_of("[defaults]\nmode = \"x\"\nbackend = \"y\"\n[daemon]\nlog_level = 1\n") ==
          "t.toml:2:8: [defaults] mode: must be one of auto, fixed, off; got \"x\"");
}

TEST_CASE("matches requires every given matcher") {
    const DeviceIdentity nvme{.name = "nvme0n1",
                              .model = "Samsung SSD 980 PRO 1TB                 ",
                              .serial = "  S5GXNF0R123456  ",
                              .wwid = "eui.002538b111b2c3d4",
                              .transport = "pcie"};
    CHECK(matches({.name = "nvme*"}, nvme));
    CHECK_FALSE(matches({.name = "vd*"}, nvme));
    CHECK(matches({.model = "Samsung SSD 980*"}, nvme));
    CHECK(matches({.model = "*1TB"}, nvme)); // the model's padding is ignored
    CHECK(matches({.serial = "S5GXNF0R123456"}, nvme));
    CHECK_FALSE(matches({.serial = "S5GXNF0R12345"}, nvme));
    CHECK(matches({.wwid = "eui.002538b111b2c3d4"}, nvme));
    CHECK_FALSE(matches({.wwid = "eui.002538b111b2c3"}, nvme));
    CHECK(matches({.name = "nvme0n1", .transport = "pcie"}, nvme));
    CHECK_FALSE(matches({.name = "nvme0n1", .transport = "tcp"}, nvme));
}

TEST_CASE("resolve_policy overlays every matching entry in file order") {
    const Config config = parsed(R"([defaults]
min_limit_us = 2
linger_ms = 7

[[device]]
name = "nvme*"
mode = "fixed"
limit_us = 10

[[device]]
name = "vd*"
mode = "off"

[[device]]
serial = "S1"
limit_us = 30
max_limit_us = 40
)");
    const Policy first = resolve_policy(config, {.name = "nvme0n1", .serial = "S0"});
    CHECK(first.mode == Mode::fixed);
    CHECK(first.limit_us == 10);
    CHECK(first.linger == 7ms);

    const Policy both = resolve_policy(config, {.name = "nvme1n1", .serial = "S1 "});
    CHECK(both.mode == Mode::fixed);
    CHECK(both.limit_us == 30);
    CHECK(both.max_limit_us == 40u);

    const Policy none = resolve_policy(config, {.name = "sda"});
    CHECK(none.mode == Mode::automatic);
    CHECK(none.min_limit_us == 2);
}

TEST_CASE("resolve_policy keeps the floor when two entries cross") {
    const Config config =
        parsed("[[device]]\nname = \"*\"\nmax_limit_us = 10\n[[device]]\nname = \"a\"\n"
               "min_limit_us = 50\n");
    const Policy policy = resolve_policy(config, {.name = "a"});
    CHECK(policy.min_limit_us == 50);
    CHECK(policy.max_limit_us == 50u);
}

TEST_CASE("layers: each document on top of the ones before, devices appended") {
    const ConfigText layers[] = {
        {"[defaults]\nmode = \"fixed\"\nlimit_us = 10\n[[device]]\nname = \"a\"\n", "main.toml"},
        {"[defaults]\nlimit_us = 20\nlinger_ms = 9\n[[device]]\nname = \"b\"\n", "10-a.toml"},
        {"[defaults]\nlimit_us = 30\n[[device]]\nname = \"c\"\n", "20-b.toml"},
    };
    auto config = parse_config_layers(layers);
    INFO((config.ok() ? std::string() : config.error().message));
    REQUIRE(config.ok());
    CHECK(config->defaults.mode == Mode::fixed); // kept from the first
    CHECK(config->defaults.limit_us == 30);      // the last one wins
    CHECK(config->defaults.linger == 9ms);
    REQUIRE(config->devices.size() == 3);
    CHECK(config->devices[0].match.name == "a");
    CHECK(config->devices[2].match.name == "c");
    CHECK(config->devices[2].origin == "20-b.toml:3:1");
    CHECK(config->sources == std::vector<fs::path>{"main.toml", "10-a.toml", "20-b.toml"});

    auto none = parse_config_layers({});
    REQUIRE(none.ok());
    CHECK(none->sources.empty());
    CHECK(none->daemon.log_level == default_config().daemon.log_level);
}

TEST_CASE("layers: a value checked against an earlier layer names the layer that is wrong") {
    const ConfigText layers[] = {{"[defaults]\nmin_limit_us = 100\n", "main.toml"},
                                 {"[defaults]\nmax_limit_us = 50\n", "50-cap.toml"}};
    auto config = parse_config_layers(layers);
    REQUIRE_FALSE(config.ok());
    CHECK(config.error().message ==
          "50-cap.toml:2:16: [defaults] max_limit_us: must be >= min_limit_us (100), got 50");
}

TEST_CASE("the example config/latgov.toml parses to the defaults") {
    const std::string text = read_file(example_config);
    const Config example = parsed(text);
    const Config defaults = default_config();
    CHECK(example.daemon.sample_interval == defaults.daemon.sample_interval);
    CHECK(example.daemon.idle_interval == defaults.daemon.idle_interval);
    CHECK(example.daemon.status_interval == defaults.daemon.status_interval);
    CHECK(example.daemon.runtime_dir == defaults.daemon.runtime_dir);
    CHECK(example.daemon.calibration_file == defaults.daemon.calibration_file);
    CHECK(example.daemon.log_level == defaults.daemon.log_level);
    CHECK(example.daemon.evidence_file == defaults.daemon.evidence_file);
    CHECK(example.daemon.queue_inflight == defaults.daemon.queue_inflight);
    CHECK(example.daemon.calibrate_on_start == defaults.daemon.calibrate_on_start);
    // Set, even to the default path, it would be written where node_exporter
    // is not installed.
    CHECK(example.daemon.metrics_file == defaults.daemon.metrics_file);
    CHECK(example.daemon.metrics_file_configured == defaults.daemon.metrics_file_configured);
    CHECK(example.defaults.mode == defaults.defaults.mode);
    CHECK(example.defaults.backend == defaults.defaults.backend);
    CHECK(example.defaults.limit_us == defaults.defaults.limit_us);
    CHECK(example.defaults.latency_fraction == defaults.defaults.latency_fraction);
    CHECK(example.defaults.min_limit_us == defaults.defaults.min_limit_us);
    CHECK(example.defaults.max_limit_us == defaults.defaults.max_limit_us);
    CHECK(example.defaults.linger == defaults.defaults.linger);
    CHECK(example.defaults.min_samples == defaults.defaults.min_samples);
    CHECK(example.defaults.linger_auto == defaults.defaults.linger_auto);
    CHECK(example.defaults.waiter_cpus == defaults.defaults.waiter_cpus);
    CHECK(example.defaults.prearm == defaults.defaults.prearm);
    CHECK(example.devices.empty());

    SUBCASE("and so do its commented-out [[device]] examples") {
        const auto start = text.find("\n# [[device]]\n");
        REQUIRE(start != std::string::npos);
        std::istringstream commented(text.substr(start + 1));
        std::string uncommented;
        for (std::string line; std::getline(commented, line);)
            uncommented += (line.starts_with("# ") ? line.substr(2) : std::string()) + "\n";
        const Config config = parsed(uncommented);
        CHECK(config.devices.size() == 4);
    }
}

TEST_CASE("a blank matcher or a glob whose bracket never closes is an error with its position") {
    CHECK(error_of("[[device]]\nserial = \"  \"\n") ==
          "t.toml:2:10: [[device]] serial: must not be blank, got \"  \"");
    CHECK(error_of("[[device]]\ntransport = \" \"\n") ==
          "t.toml:2:13: [[device]] transport: must not be blank, got \" \"");
    CHECK(error_of("[[device]]\nname = \"nvme[0n1\"\n") ==
          "t.toml:2:8: [[device]] name: unbalanced '[' in pattern \"nvme[0n1\"");
    CHECK(error_of("[[device]]\nmodel = \"Samsung [[:alpha:]\"\n") ==
          "t.toml:2:9: [[device]] model: unbalanced '[' in pattern \"Samsung [[:alpha:]\"");
    // Brackets that close, a ']' first among the members, an escaped '['.
    for (const char* glob : {"nvme[0-9]n1", "sd[]a]", "sd[!a]", "x[[:digit:]]", "a\\\\[b"}) {
        CAPTURE(glob);
        const Config config = parsed("[[device]]\nname = \"" + std::string(glob) + "\"\n");
        REQUIRE(config.devices.size() == 1);
    }
    // Only globs are checked for brackets: a serial is compared as it is.
    CHECK(parsed("[[device]]\nserial = \"S[1\"\n").devices.at(0).match.serial == "S[1");
}

TEST_CASE("a name matcher reaches a multipath path disk by its head's name") {
    DeviceMatch match;
    match.name = "nvme1n1";
    DeviceIdentity path{.name = "nvme1c0n1", .transport = "tcp", .head = "nvme1n1"};
    CHECK(matches(match, path));
    CHECK_FALSE(matches(match, DeviceIdentity{.name = "nvme1c0n1"})); // no head: no alias
    match.name = "nvme1c0n1"; // the path's own name still matches
    CHECK(matches(match, path));
    match.transport = "rdma"; // every other matcher still has its say
    CHECK_FALSE(matches(match, path));

    const Config config = parsed("[[device]]\nname = \"nvme1n1\"\nmode = \"off\"\n\n"
                                 "[[device]]\nname = \"nvme9n*\"\nmode = \"off\"\n");
    CHECK(resolve_policy(config, path).mode == Mode::off);
    const std::vector<DeviceIdentity> devices{path};
    CHECK(unmatched_name_rules(config, devices) ==
          std::vector<std::string>{
              "t.toml:5:1: [[device]] name = \"nvme9n*\" matches no block device"});
    // The name matches, another matcher does not: the warning names both.
    const Config by_serial =
        parsed("[[device]]\nname = \"nvme1n1\"\nserial = \"nope\"\nmode = \"off\"\n");
    CHECK(unmatched_name_rules(by_serial, devices) ==
          std::vector<std::string>{"t.toml:1:1: [[device]] name = \"nvme1n1\", serial = \"nope\" "
                                   "matches no block device"});
}

TEST_CASE("a model pattern padded with spaces matches, as a model read from sysfs is") {
    // NVMe models are padded to 40 characters; one pasted from sysfs keeps
    // its spaces, and both sides are trimmed.
    DeviceMatch match;
    match.model = "QEMU NVMe Ctrl   ";
    CHECK(matches(match, DeviceIdentity{.name = "nvme0n1", .model = "QEMU NVMe Ctrl          "}));
    match.model = "  QEMU*";
    CHECK(matches(match, DeviceIdentity{.name = "nvme0n1", .model = "QEMU NVMe Ctrl"}));
}

TEST_CASE("a string with a NUL character is refused, naming the key") {
    for (const char* text : {"[[device]]\nname = \"nvme0n1\\u0000zzz\"\n",
                             "[daemon]\ncalibration_file = \"/var/lib/cal\\u0000x\"\n",
                             "[daemon]\nmetrics_file = \"/var/lib/m.prom\\u0000x\"\n",
                             "[defaults]\nmode = \"auto\\u0000x\"\n"}) {
        auto config = parse_config(text, "t.toml");
        REQUIRE_FALSE(config);
        CHECK(config.error().message.find("must not contain a NUL character") != std::string::npos);
        CHECK(config.error().message.starts_with("t.toml:"));
    }
}
