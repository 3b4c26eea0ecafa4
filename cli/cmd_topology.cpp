// `latgov topology [--json]`: hardware queues, their IRQs and completion CPUs.
#include "commands.hpp"
#include "latgov/discovery.hpp"
#include "latgov/json.hpp"
#include "latgov/nvme_identify.hpp"
#include "latgov/parse.hpp"
#include "latgov/topology_json.hpp"

#include <cstdio>
#include <fmt/format.h>

namespace latgov::cli {

int topology(const Args& args) {
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
        add_nvme_power_states(root, *topology); // only the JSON shows them
        fmt::print("{}\n", dump_for_terminal(to_json(*topology), 2));
        return 0;
    }
    print_text(format_topology_table(*topology));
    for (const auto& warning : topology->warnings)
        fmt::print(stderr, "warning: {}\n", terminal_safe(warning));
    return 0;
}

} // namespace latgov::cli
