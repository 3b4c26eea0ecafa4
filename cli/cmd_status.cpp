// `latgov status [--json] [--watch]`: what latgovd holds now, from its
// status file, and the limits others hold beside it.
#include "commands.hpp"
#include "latgov/config.hpp"
#include "latgov/host_facts.hpp"
#include "latgov/parse.hpp"
#include "latgov/status.hpp"
#include "latgov/text_file.hpp"

#include <chrono>
#include <cstdio>
#include <ctime>
#include <exception>
#include <fmt/format.h>
#include <thread>

namespace latgov::cli {

namespace {

// Redraws the status in place every `interval` until interrupted.
int watch_status(const SysRoot& root, const std::filesystem::path& status_file,
                 std::chrono::milliseconds interval) {
    for (;;) {
        const auto status = read_status(status_file);
        const std::time_t now = std::time(nullptr);
        char stamp[32];
        std::strftime(stamp, sizeof stamp, "%H:%M:%S", std::localtime(&now));
        std::string body = status.is_object()
                               ? format_status(status) + format_other_holders(root, status)
                               : "no status at " + status_file.string() + ": is latgovd running?\n";
        // Home, draw, clear what the previous frame left right of and below
        // each line.
        for (size_t at = body.find('\n'); at != std::string::npos; at = body.find('\n', at + 4))
            body.replace(at, 1, "\x1b[K\n");
        fmt::print("\x1b[H{}Every {:.1f} s, {} (Ctrl-C stops)\x1b[K\n\x1b[J", body,
                   static_cast<double>(interval.count()) / 1000.0, stamp);
        std::fflush(stdout);
        std::this_thread::sleep_for(interval);
    }
}

} // namespace

nlohmann::json read_status(const std::filesystem::path& path) {
    auto text = read_text_file(path);
    if (!text)
        return nullptr;
    auto status = nlohmann::json::parse(*text, nullptr, false);
    return status.is_discarded() ? nlohmann::json(nullptr) : status;
}

int status(const Args& args) {
    bool as_json = false;
    bool watch = false;
    std::chrono::milliseconds interval{1000};
    std::string runtime_dir{default_runtime_dir};
    for (size_t i = 0; i < args.rest.size(); ++i) {
        if (args.rest[i] == "--json") {
            as_json = true;
        } else if (args.rest[i] == "--watch") {
            watch = true;
        } else if (args.rest[i] == "--interval" && i + 1 < args.rest.size()) {
            auto seconds = parse_u64(args.rest[++i]);
            if (!seconds || *seconds == 0 || *seconds > 3600)
                return usage_error("status: --interval takes whole seconds (1..3600)");
            interval = std::chrono::seconds(*seconds);
        } else if (args.rest[i] == "--runtime-dir" && i + 1 < args.rest.size()) {
            runtime_dir = args.rest[++i];
        } else {
            return usage_error("status: unknown option " + args.rest[i]);
        }
    }
    const SysRoot root(args.sysroot);
    const std::string path = runtime_dir + "/status.json";
    if (watch && !as_json)
        return watch_status(root, path, interval);
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
        fmt::print("{}{}", format_status(status), format_other_holders(root, status));
    } catch (const std::exception& e) {
        return fail("Failed to read " + path + ": " + e.what());
    }
    return 0;
}

} // namespace latgov::cli
