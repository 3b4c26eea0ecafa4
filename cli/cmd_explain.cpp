// `latgov explain DEVICE`: why the device's limit is what it is, from the
// configuration latgovd reads, the idle costs it uses and its status.
#include "commands.hpp"
#include "latgov/config_file.hpp"
#include "latgov/discovery.hpp"
#include "latgov/explain.hpp"
#include "latgov/host_facts.hpp"
#include "latgov/idle_costs.hpp"

#include <fmt/format.h>

namespace latgov::cli {

int explain(const Args& args) {
    const SysRoot root(args.sysroot);
    // A snapshot's status is the one inside it, not this host's latgovd's,
    // and whether that latgovd runs is not asked of this host.
    std::filesystem::path runtime_dir = root.resolve(default_runtime_dir);
    bool ask_writer = root.is_live();
    std::filesystem::path config_file{default_config_file};
    bool config_given = false; // then it must exist, as for latgovd
    std::string device;
    for (size_t i = 0; i < args.rest.size(); ++i) {
        if (args.rest[i] == "--runtime-dir" && i + 1 < args.rest.size()) {
            runtime_dir = args.rest[++i];
            ask_writer = true; // a directory of this host
        } else if (args.rest[i] == "--config" && i + 1 < args.rest.size()) {
            config_file = args.rest[++i];
            config_given = true;
        } else if (!args.rest[i].starts_with("-") && device.empty())
            device = args.rest[i];
        else
            return option_error("explain", args.rest[i], {"--runtime-dir", "--config"});
    }
    if (device.empty())
        return usage_error("explain: which DEVICE? (see `latgov topology`)");
    auto topology = discover_topology(root);
    if (!topology)
        return fail(topology.error().message);
    auto config = load_config(config_file, config_given);
    if (!config)
        return fail(config.error().message);
    // The costs latgovd uses; why a calibration does not apply is in the source.
    const auto costs = load_idle_costs(root, config->daemon, *topology, [](const std::string&) {});
    const auto status = read_status(runtime_dir);
    auto text = explain_device({*topology, *config, costs.per_cpu, costs.source, status}, device);
    if (!text)
        return fail(text.error().message);
    fmt::print("{}{}", *text, ask_writer ? format_writer_gone(runtime_dir, status) : "");
    return 0;
}

} // namespace latgov::cli
