#include "latgov/cli.hpp"

#include "latgov/snapshot.hpp"
#include "latgov/status.hpp"
#include "latgov/topology_json.hpp"

#include <cstdio>
#include <fmt/core.h>
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
    std::string runtime_dir = "/run/latgov";
    for (size_t i = 0; i < args.rest.size(); ++i) {
        if (args.rest[i] == "--json")
            as_json = true;
        else if (args.rest[i] == "--runtime-dir" && i + 1 < args.rest.size())
            runtime_dir = args.rest[++i];
        else
            return usage_error("status: unknown option " + args.rest[i]);
    }
    const std::string path = runtime_dir + "/status.json";
    std::ifstream in(path);
    if (!in)
        return fail("no status at " + path + ": is latgovd running?");
    auto status = nlohmann::json::parse(in, nullptr, false);
    if (status.is_discarded())
        return fail("Failed to parse " + path);
    if (as_json)
        fmt::print("{}\n", status.dump(2));
    else
        fmt::print("{}", format_status(status));
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
    return usage_error("unknown command " + args.command);
}

} // namespace latgov
