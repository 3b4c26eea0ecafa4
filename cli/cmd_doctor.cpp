// `latgov doctor`: checks this host for what keeps latgov from working;
// exit 1 when something needs attention.
#include "commands.hpp"
#include "latgov/config.hpp"
#include "latgov/discovery.hpp"
#include "latgov/doctor.hpp"
#include "latgov/host_facts.hpp"

#include <fmt/format.h>

namespace latgov::cli {

int doctor(const Args& args) {
    std::filesystem::path runtime_dir{default_runtime_dir};
    for (size_t i = 0; i < args.rest.size(); ++i) {
        if (args.rest[i] == "--runtime-dir" && i + 1 < args.rest.size())
            runtime_dir = args.rest[++i];
        else
            return usage_error("doctor: unknown option " + args.rest[i]);
    }
    const SysRoot root(args.sysroot);
    auto topology = discover_topology(root);
    if (!topology)
        return fail(topology.error().message);
    const auto facts = read_host_facts(root, *topology, read_status(runtime_dir), runtime_dir);
    if (!facts)
        return fail(facts.error().message);
    const auto findings = diagnose(*facts);
    fmt::print("{}", format_findings(findings));
    const bool attention = needs_attention(findings);
    fmt::print("{}\n", attention ? "Something needs attention (lines marked FIX)."
                                 : "Nothing needs attention.");
    return attention ? 1 : 0;
}

} // namespace latgov::cli
