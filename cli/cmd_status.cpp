// `latgov status [--json]`: what latgovd holds now, from its status file.
#include "commands.hpp"
#include "latgov/config.hpp"
#include "latgov/status.hpp"
#include "latgov/text_file.hpp"

#include <exception>
#include <fmt/format.h>

namespace latgov::cli {

int status(const Args& args) {
    bool as_json = false;
    std::string runtime_dir{default_runtime_dir};
    for (size_t i = 0; i < args.rest.size(); ++i) {
        if (args.rest[i] == "--json")
            as_json = true;
        else if (args.rest[i] == "--runtime-dir" && i + 1 < args.rest.size())
            runtime_dir = args.rest[++i];
        else
            return usage_error("status: unknown option " + args.rest[i]);
    }
    const std::string path = runtime_dir + "/status.json";
    auto text = read_text_file(path);
    if (!text)
        return fail("no status at " + path + ": is latgovd running?");
    auto status = nlohmann::json::parse(*text, nullptr, false);
    if (status.is_discarded())
        return fail("Failed to parse " + path);
    if (as_json) {
        fmt::print("{}\n", status.dump(2, ' ', false, nlohmann::json::error_handler_t::replace));
        return 0;
    }
    try {
        fmt::print("{}", format_status(status));
    } catch (const std::exception& e) {
        return fail("Failed to read " + path + ": " + e.what());
    }
    return 0;
}

} // namespace latgov::cli
