// `latgov explain DEVICE`: why the device's limit is what it is, from the
// configuration latgovd reads, the idle costs it uses and its status.
#include "commands.hpp"
#include "latgov/config_file.hpp"
#include "latgov/discovery.hpp"
#include "latgov/explain.hpp"
#include "latgov/host_facts.hpp"
#include "latgov/idle_costs.hpp"
#include "latgov/status_place.hpp"

#include <fmt/format.h>

namespace latgov::cli {

int explain(const Args& args) {
    const SysRoot root(args.sysroot);
    std::optional<std::filesystem::path> runtime_dir;
    std::filesystem::path config_file{default_config_file};
    bool config_given = false; // then it must exist, as for latgovd
    std::string device;
    for (size_t i = 0; i < args.rest.size(); ++i) {
        if (args.rest[i] == "--runtime-dir" && i + 1 < args.rest.size()) {
            runtime_dir = args.rest[++i];
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
    // No status: latgovd is not running. One that cannot be read is an
    // error, not taken for none.
    const StatusPlace place(root, runtime_dir);
    auto loaded = place.load();
    if (!loaded && place.present())
        return fail(loaded.error().message);
    const nlohmann::json status = loaded ? std::move(*loaded) : nlohmann::json(nullptr);
    auto text = explain_device({*topology, *config, costs.per_cpu, costs.source, status}, device);
    if (!text)
        return fail(text.error().message);
    print_text(*text + (place.of_this_host() ? format_writer_gone(place.dir(), status) : ""));
    return 0;
}

} // namespace latgov::cli
