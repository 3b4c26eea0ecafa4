#include "latgov/cli.hpp"

#include "latgov/calibrate.hpp"
#include "latgov/cli_host.hpp"
#include "latgov/snapshot.hpp"
#include "latgov/status.hpp"
#include "latgov/topology_json.hpp"

#include <atomic>
#include <csignal>
#include <cstdio>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <fstream>
#include <string>
#include <string_view>
#include <vector>

namespace latgov {

namespace {

constexpr std::string_view usage = R"(Usage: latgov [--sysroot DIR] COMMAND [OPTIONS]

Commands:
  topology [--json]        hardware queues, their IRQs and completion CPUs
  snapshot -o FILE.tar.gz  capture the files topology discovery reads
  status [--json]          what latgovd holds now (from RUNTIME_DIR/status.json)
      [--runtime-dir DIR]  default /run/latgov
      [--watch]            redraw in place every --interval seconds (default 1)
  doctor                   check this host for what keeps latgov from working;
      [--runtime-dir DIR]  exit 1 when something needs attention
  explain DEVICE           why the device's limit is what it is
      [--config FILE]      default the one latgovd reads
      [--runtime-dir DIR]
  calibrate                measure each idle state's wake-up cost with QD1 reads
      [--device NAME]      disk to read (read-only); default the first governed one
      [--file PATH]        read this file on the disk instead of the raw device
      [--cpu N]            completion CPU to step; default queue 0's
      [--rounds N] [--ios N] [--max-seconds S]   default 5, 1000 per level, 30
      [--output FILE]      default /var/lib/latgov/calibration.toml
      [--runtime-dir DIR]  journal of the values it writes; default /run/latgov

Options:
  --sysroot DIR            read sysfs/procfs/dev under DIR (a captured tree)
  -h, --help               this text
)";

struct Args {
    std::string sysroot = "/";
    std::string command;
    std::vector<std::string> rest;
};

int fail(const std::string& message) {
    fmt::print(stderr, "latgov: {}\n", message);
    return 1;
}

int usage_error(const std::string& message) {
    fmt::print(stderr, "latgov: {}\n{}", message, usage);
    return 2;
}

int cmd_topology(const Args& args) {
    bool as_json = false;
    for (const auto& arg : args.rest) {
        if (arg == "--json")
            as_json = true;
        else
            return usage_error("topology: unknown option " + arg);
    }
    SysRoot root(args.sysroot);
    auto topology = discover_topology(root);
    if (!topology)
        return fail(topology.error().message);
    if (as_json) {
        fmt::print("{}\n", to_json(*topology).dump(2));
        return 0;
    }
    fmt::print("{}", format_topology_table(*topology));
    for (const auto& warning : topology->warnings)
        fmt::print(stderr, "warning: {}\n", warning);
    return 0;
}

int cmd_snapshot(const Args& args) {
    std::string output;
    for (size_t i = 0; i < args.rest.size(); ++i) {
        if ((args.rest[i] == "-o" || args.rest[i] == "--output") && i + 1 < args.rest.size())
            output = args.rest[++i];
        else
            return usage_error("snapshot: unknown option " + args.rest[i]);
    }
    if (output.empty())
        return usage_error("snapshot: -o FILE.tar.gz is required");
    SysRoot root(args.sysroot);
    root.start_capture();
    auto topology = discover_topology(root);
    if (!topology)
        return fail(topology.error().message);
    if (auto written = write_snapshot(*root.capture(), output); !written)
        return fail(written.error().message);
    fmt::print(stderr, "latgov: wrote {} ({} paths, {} devices)\n", output,
               root.capture()->entries().size(), topology->devices.size());
    return 0;
}

int cmd_status(const Args& args) {
    bool as_json = false;
    bool watch = false;
    std::chrono::milliseconds interval{1000};
    std::string runtime_dir = "/run/latgov";
    for (size_t i = 0; i < args.rest.size(); ++i) {
        if (args.rest[i] == "--json")
            as_json = true;
        else if (args.rest[i] == "--watch")
            watch = true;
        else if (args.rest[i] == "--interval" && i + 1 < args.rest.size()) {
            auto seconds = parse_u64(args.rest[++i]);
            if (!seconds || *seconds == 0 || *seconds > 3600)
                return usage_error("status: --interval takes whole seconds (1..3600)");
            interval = std::chrono::seconds(*seconds);
        } else if (args.rest[i] == "--runtime-dir" && i + 1 < args.rest.size())
            runtime_dir = args.rest[++i];
        else
            return usage_error("status: unknown option " + args.rest[i]);
    }
    const std::string path = runtime_dir + "/status.json";
    if (watch && !as_json)
        return watch_status(args.sysroot, path, interval);
    std::ifstream in(path);
    if (!in)
        return fail("no status at " + path + ": is latgovd running?");
    auto status = nlohmann::json::parse(in, nullptr, false);
    if (status.is_discarded())
        return fail("Failed to parse " + path);
    if (as_json)
        fmt::print("{}\n", status.dump(2));
    else
        fmt::print("{}{}", format_status(status), format_other_holders(args.sysroot, status));
    return 0;
}

std::atomic<bool> calibration_stop{false};

int cmd_calibrate(const Args& args) {
    CalibrateOptions options;
    std::filesystem::path output = "/var/lib/latgov/calibration.toml";
    for (size_t i = 0; i < args.rest.size(); ++i) {
        const std::string& arg = args.rest[i];
        if (i + 1 >= args.rest.size())
            return usage_error("calibrate: unknown option or missing value " + arg);
        const std::string& value = args.rest[++i];
        auto number = [&](int& out) {
            auto parsed = parse_u64(value);
            if (!parsed || *parsed == 0 || *parsed > 1000000)
                return false;
            out = static_cast<int>(*parsed);
            return true;
        };
        int n = 0;
        if (arg == "--device")
            options.device = value;
        else if (arg == "--cpu" && parse_u64(value))
            options.cpu = static_cast<int>(*parse_u64(value));
        else if (arg == "--rounds" && number(options.rounds))
            continue;
        else if (arg == "--ios" && number(options.ios_per_level))
            continue;
        else if (arg == "--max-seconds" && number(n))
            options.max_time = std::chrono::seconds(n);
        else if (arg == "--file")
            options.file = value;
        else if (arg == "--output")
            output = value;
        else if (arg == "--runtime-dir")
            options.runtime_dir = value;
        else
            return usage_error("calibrate: bad option " + arg + " " + value);
    }
    struct sigaction action {};
    action.sa_handler = [](int) { calibration_stop = true; };
    for (int sig : {SIGINT, SIGTERM, SIGHUP})
        ::sigaction(sig, &action, nullptr);
    SysRoot root(args.sysroot);
    auto calibration = run_calibration(root, options, calibration_stop);
    if (!calibration)
        return fail(calibration.error().message);
    fmt::print("{:<10} {:>8} {:>10} {:>10}   round medians\n", "LEVEL", "LIMIT", "MEDIAN_US",
               "P99_US");
    for (const auto& level : calibration->levels)
        fmt::print("{:<10} {:>8} {:>10.1f} {:>10.1f}   {:.1f}\n", level.name,
                   format_resume_latency(level.limit), level.median_us, level.p99_us,
                   fmt::join(level.round_medians_us, " "));
    for (const auto& state : calibration->states)
        fmt::print("state {:<10} declared exit latency {:>4} us, measured cost {:.1f} us\n",
                   state.name, state.declared_exit_latency_us, state.measured_cost_us);
    std::error_code ec;
    std::filesystem::create_directories(output.parent_path(), ec);
    std::ofstream out(output);
    if (!(out << format_calibration(*calibration)))
        return fail("Failed to write " + output.string());
    fmt::print("wrote {}\n", output.string());
    return 0;
}

} // namespace

int cli_main(int argc, char** argv) {
    Args args;
    int i = 1;
    for (; i < argc; ++i) {
        std::string_view arg = argv[i];
        if (arg == "-h" || arg == "--help") {
            fmt::print("{}", usage);
            return 0;
        }
        if (arg == "--sysroot" && i + 1 < argc) {
            args.sysroot = argv[++i];
        } else if (arg.starts_with("--sysroot=")) {
            args.sysroot = std::string(arg.substr(10));
        } else if (!arg.starts_with("-")) {
            break;
        } else {
            return usage_error("unknown option " + std::string(arg));
        }
    }
    if (i == argc)
        return usage_error("no command given");
    args.command = argv[i];
    for (++i; i < argc; ++i) {
        std::string_view arg = argv[i];
        if (arg == "--sysroot" && i + 1 < argc)
            args.sysroot = argv[++i];
        else
            args.rest.emplace_back(arg);
    }
    if (args.command == "topology")
        return cmd_topology(args);
    if (args.command == "snapshot")
        return cmd_snapshot(args);
    if (args.command == "status")
        return cmd_status(args);
    if (args.command == "calibrate")
        return cmd_calibrate(args);
    if (args.command == "doctor")
        return doctor_command(args.sysroot, args.rest);
    if (args.command == "explain")
        return explain_command(args.sysroot, args.rest);
    return usage_error("unknown command " + args.command);
}

} // namespace latgov
