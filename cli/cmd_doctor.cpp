// `latgov doctor`: checks this host (or, under --sysroot, an unpacked
// snapshot) for what keeps latgov from working; exit 3 when something needs
// attention, 1 when the check itself failed.
#include "commands.hpp"
#include "latgov/config.hpp"
#include "latgov/discovery.hpp"
#include "latgov/doctor.hpp"
#include "latgov/host_facts.hpp"
#include "latgov/status_place.hpp"

#include <fmt/format.h>

namespace latgov::cli {

namespace {

// Its own status, apart from fail()'s 1 and usage_error()'s 2: a script
// tells a host that needs a fix from a check that could not run.
constexpr int exit_needs_attention = 3;

} // namespace

int doctor(const Args& args) {
    const SysRoot root(args.sysroot);
    std::optional<std::filesystem::path> runtime_dir;
    for (size_t i = 0; i < args.rest.size(); ++i) {
        if (args.rest[i] == "--runtime-dir" && i + 1 < args.rest.size())
            runtime_dir = args.rest[++i];
        else
            return option_error("doctor", args.rest[i], {"--runtime-dir"});
    }
    auto topology = discover_topology(root);
    if (!topology)
        return fail(topology.error().message);
    const StatusPlace place(root, runtime_dir);
    const auto status = place.load();
    auto facts =
        read_host_facts(root, *topology, status ? *status : nlohmann::json(nullptr), place);
    if (!facts)
        return fail(facts.error().message);
    // Missing is no status (latgovd not running); there but unreadable or
    // not JSON hides what latgov holds.
    if (!status && place.present())
        facts->status_error = status.error().message;
    const auto findings = diagnose(*facts);
    print_text(format_findings(findings));
    const bool attention = needs_attention(findings);
    fmt::print("{}\n", attention ? "Something needs attention (lines marked FIX)."
                                 : "Nothing needs attention.");
    return attention ? exit_needs_attention : 0;
}

} // namespace latgov::cli
