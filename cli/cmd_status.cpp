// `latgov status [--json] [--watch]`: what latgovd holds now, from its
// status file, and the limits others hold beside it.
#include "commands.hpp"
#include "latgov/host_facts.hpp"
#include "latgov/json.hpp"
#include "latgov/parse.hpp"
#include "latgov/status_place.hpp"
#include "latgov/status_text.hpp"

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <ctime>
#include <exception>
#include <filesystem>
#include <fmt/format.h>
#include <optional>
#include <string_view>
#include <unistd.h>

namespace latgov::cli {

namespace {

// On a terminal: cursor home, each line cleared to its end, the rest of the
// screen cleared below, so the frame is drawn over the previous one.
// Elsewhere (a pipe, a file): a plain copy headed by the time, no control
// sequences, so a log keeps every refresh.
std::string watch_frame(std::string body, std::chrono::milliseconds interval, const char* stamp,
                        bool terminal) {
    const double seconds = static_cast<double>(interval.count()) / 1000.0;
    if (!terminal)
        return fmt::format("--- {}, every {:.1f} s ---\n{}\n", stamp, seconds, body);
    for (size_t at = body.find('\n'); at != std::string::npos; at = body.find('\n', at + 4))
        body.replace(at, 1, "\x1b[K\n");
    return fmt::format("\x1b[H{}Every {:.1f} s, {} (Ctrl-C stops)\x1b[K\n\x1b[J", body, seconds,
                       stamp);
}

// Writes and flushes; false when stdout is gone (a hung-up terminal; a
// closed pipe ends the process by SIGPIPE first, as it ends cat).
bool put(std::string_view text) {
    return std::fwrite(text.data(), 1, text.size(), stdout) == text.size() &&
           std::fflush(stdout) == 0;
}

enum class Wake { deadline, resize, stop };

// Sleeps until `deadline` or a signal of `signals` (blocked by the caller),
// whichever comes first.
Wake wait_until(std::chrono::steady_clock::time_point deadline, const sigset_t& signals) {
    for (;;) {
        const auto left = deadline - std::chrono::steady_clock::now();
        if (left <= std::chrono::steady_clock::duration::zero())
            return Wake::deadline;
        const auto s = std::chrono::duration_cast<std::chrono::seconds>(left);
        const timespec timeout{static_cast<time_t>(s.count()),
                               static_cast<long>(std::chrono::nanoseconds(left - s).count())};
        const int signal = sigtimedwait(&signals, nullptr, &timeout);
        if (signal == SIGWINCH)
            return Wake::resize;
        if (signal > 0)
            return Wake::stop;
        if (errno == EAGAIN)
            return Wake::deadline;
        // EINTR: a signal outside the set (SIGCONT after Ctrl-Z); wait on.
    }
}

// Whether the latgovd that wrote `status` is gone, in words (nothing when it
// runs or when the status is a snapshot's: its latgovd does not run here).
std::string writer_gone(const StatusPlace& place, const nlohmann::json& status) {
    return place.of_this_host() ? format_writer_gone(place.dir(), status) : std::string();
}

// What in `status` breaks the schema, naming the file.
Error unreadable(const StatusPlace& place, const std::exception& e) {
    return make_error(
        fmt::format("Failed to read {}: {}", (place.dir() / status_file_name).string(), e.what()));
}

// The text of `status` with the limits others hold beside it, or what in it
// breaks the schema.
Result<std::string> status_text(const SysRoot& root, const StatusPlace& place,
                                const nlohmann::json& status) {
    try {
        const auto now_s = std::chrono::duration_cast<std::chrono::seconds>(
                               std::chrono::system_clock::now().time_since_epoch())
                               .count();
        return format_status(status, now_s) + format_other_holders(root, status, place) +
               writer_gone(place, status);
    } catch (const std::exception& e) {
        return unreadable(place, e);
    }
}

// Shows the status every `interval` until SIGINT (Ctrl-C), SIGTERM or
// SIGHUP, then exits 0. On a terminal the frame is redrawn in place with the
// cursor hidden, shown again on the way out, and a resize redraws at once.
int watch_status(const SysRoot& root, const StatusPlace& place,
                 std::chrono::milliseconds interval) {
    const bool terminal = isatty(STDOUT_FILENO) == 1;
    sigset_t signals;
    sigemptyset(&signals);
    for (int signal : {SIGINT, SIGTERM, SIGHUP})
        sigaddset(&signals, signal);
    if (terminal)
        sigaddset(&signals, SIGWINCH);
    // Blocked, they wait for sigtimedwait: the process is never killed
    // half-way through a frame with the cursor hidden.
    sigprocmask(SIG_BLOCK, &signals, nullptr);
    if (terminal && !put("\x1b[?25l\x1b[H\x1b[2J"))
        return output_failed(errno);
    auto next = std::chrono::steady_clock::now();
    for (;;) {
        const auto status = place.load();
        const auto text = status ? status_text(root, place, *status) : status.error();
        std::string body = terminal_safe(text ? *text : text.error().message + "\n");
        const std::time_t now = std::time(nullptr);
        char stamp[32];
        std::strftime(stamp, sizeof stamp, "%H:%M:%S", std::localtime(&now));
        if (!put(watch_frame(std::move(body), interval, stamp, terminal))) {
            const int error = errno;
            if (terminal)
                put("\x1b[?25h\n");
            return output_failed(error);
        }
        // Drift-free: the next frame is due one interval after the last one
        // was due, not after this one was drawn.
        while (next <= std::chrono::steady_clock::now())
            next += interval;
        if (wait_until(next, signals) == Wake::stop)
            break;
    }
    if (terminal)
        put("\x1b[?25h\n");
    return 0;
}

} // namespace

int status(const Args& args) {
    bool as_json = false;
    bool watch = false;
    std::optional<std::chrono::milliseconds> interval;
    std::optional<std::filesystem::path> given_dir;
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
            given_dir = args.rest[++i];
        } else {
            return option_error("status", args.rest[i], {"--interval", "--runtime-dir"});
        }
    }
    const SysRoot root(args.sysroot);
    const StatusPlace place(root, given_dir);
    if (watch && as_json)
        return usage_error("status: --watch redraws the text; --json prints once");
    if (interval && !watch)
        return usage_error("status: --interval sets how often --watch redraws; give --watch too");
    if (watch)
        return watch_status(root, place, interval.value_or(std::chrono::seconds(1)));
    auto status = place.load();
    if (!status)
        return fail(status.error().message);
    if (!as_json) {
        const auto text = status_text(root, place, *status);
        if (!text)
            return fail(text.error().message);
        print_text(*text);
        return 0;
    }
    // A document the text form cannot read is refused here too, not passed
    // on to a script as if it were sound: the same reading of latgovd's
    // part, without what the text adds from the host.
    try {
        format_status(*status);
    } catch (const std::exception& e) {
        return fail(unreadable(place, e).message);
    }
    // latgovd's document, and whether the latgovd that wrote it still runs
    // (`latgovd_running`, added here, null when that cannot be told; said on
    // stderr too when it does not: the same answer, asked once).
    const auto running =
        place.of_this_host() ? status_writer_running(place.dir(), *status) : std::nullopt;
    (*status)["latgovd_running"] = running ? nlohmann::json(*running) : nlohmann::json(nullptr);
    fmt::print("{}\n", dump_for_terminal(*status, 2));
    if (const auto gone = format_writer_gone(running, *status); !gone.empty())
        fmt::print(stderr, "{}", gone);
    return 0;
}

} // namespace latgov::cli
