// latgovd: the latency governor daemon. The command line is parsed here;
// the loop is in daemon.cpp.
#include "daemon.hpp"
#include "latgov/parse.hpp"
#include "latgov/qos.hpp"
#include "latgov/runtime_dir.hpp"
#include "latgov/status.hpp"
#include "logging.hpp"
#include "runtime_setup.hpp"

#include <csignal>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <string_view>
#include <sys/stat.h>
#include <systemd/sd-daemon.h>

namespace {

using namespace latgov;

// The longest --wait-for-lock, in seconds.
constexpr std::uint64_t max_wait_for_lock = 3600;

constexpr std::string_view usage_template = R"(Usage: latgovd [OPTIONS]

Holds CPU wake-up latency limits on the CPUs that complete block IO, only
while IO is outstanding. Runs in the foreground (systemd Type=notify).

Options:
  --config FILE      configuration (default {config}; missing = embedded default)
  --check-config     validate the configuration and exit 0 (valid) or 1
  --restore          put back the per-CPU values a previous run left, and exit
  --sysroot DIR      read and write sysfs/procfs/dev under DIR (tests)
  --runtime-dir DIR  override [daemon] runtime_dir
  --metrics-file FILE
                     override [daemon] metrics_file ("" writes none)
  --wait-for-lock S  wait up to S seconds (0..{max_wait}, default 0) for a runtime
                     directory that `latgov calibrate` or another latgovd holds
                     (also with --restore)
  --dry-run          compute and log, change nothing: no PM QoS write, no restore,
                     no calibration, no file in the runtime directory
  -h, --help         this text
)";

const std::string usage =
    fmt::format(usage_template, fmt::arg("config", latgov::default_config_file),
                fmt::arg("max_wait", max_wait_for_lock));

// nullopt after printing why (or the help text: then `help` is set).
std::optional<Options> parse_options(int argc, char** argv, bool& help) {
    Options o;
    for (int i = 1; i < argc; ++i) {
        std::string_view arg = argv[i];
        auto value = [&]() -> const char* { return i + 1 < argc ? argv[++i] : nullptr; };
        if (arg == "-h" || arg == "--help") {
            fmt::print("{}", usage);
            help = true;
            return std::nullopt;
        } else if (arg == "--check-config") {
            o.check_config = true;
        } else if (arg == "--restore") {
            o.restore = true;
        } else if (arg == "--dry-run") {
            o.dry_run = true;
        } else if (arg == "--wait-for-lock") {
            const char* v = value();
            std::optional<std::uint64_t> seconds;
            if (v)
                if (auto parsed = latgov::parse_u64(v))
                    seconds = *parsed;
            if (!seconds || *seconds > max_wait_for_lock) {
                fmt::print(stderr, "latgovd: --wait-for-lock takes seconds (0..{}), got {}\n{}",
                           max_wait_for_lock, v ? v : "nothing", usage);
                return std::nullopt;
            }
            o.wait_for_lock = std::chrono::seconds(*seconds);
        } else if (arg == "--config" || arg == "--sysroot" || arg == "--runtime-dir" ||
                   arg == "--metrics-file") {
            const char* v = value();
            if (!v) {
                fmt::print(stderr, "latgovd: {} needs a value\n{}", arg, usage);
                return std::nullopt;
            }
            if (arg == "--config") {
                o.config = v;
                o.config_given = true;
            } else if (arg == "--sysroot") {
                o.sysroot = v;
            } else if (arg == "--runtime-dir") {
                o.runtime_dir = v;
            } else {
                // Relative to where latgovd was started: a SIGHUP reload
                // must not move it.
                std::error_code ec;
                o.metrics_file = *v ? std::filesystem::absolute(v, ec) : std::filesystem::path();
                if (ec) {
                    fmt::print(stderr, "latgovd: --metrics-file {}: {}\n", v, ec.message());
                    return std::nullopt;
                }
            }
        } else {
            fmt::print(stderr, "latgovd: unknown option {}\n{}", arg, usage);
            return std::nullopt;
        }
    }
    if (o.restore && o.dry_run) {
        // A restore writes the values back; a dry run writes nothing.
        fmt::print(stderr, "latgovd: --restore and --dry-run exclude each other\n{}", usage);
        return std::nullopt;
    }
    return o;
}

// The configured files, or the defaults when the configuration cannot be
// read: the values a killed run left go back all the same.
DaemonSettings restore_settings(const Options& options, const Result<Config>& config) {
    DaemonSettings settings = config ? config->daemon : DaemonSettings{};
    if (!config && options.runtime_dir)
        settings.runtime_dir = *options.runtime_dir;
    if (!config && options.metrics_file)
        settings.metrics_file = *options.metrics_file;
    return settings;
}

// --restore: what a killed latgovd left in its runtime directory put back
// or removed, as a start does first. Under the lock, which a running
// latgovd holds: restoring under it would undo its limits and delete its
// journal.
int restore(const Options& options, const Result<Config>& config) {
    const DaemonSettings settings = restore_settings(options, config);
    // A missing directory has nothing to restore; one that is not ours is refused.
    std::error_code ec;
    if (!std::filesystem::exists(settings.runtime_dir, ec) && !ec)
        return 0;
    auto dir = RuntimeDir::open(settings.runtime_dir, false);
    if (!dir) {
        spdlog::error("{}", dir.error().message);
        return 1;
    }
    if (const auto narrowed = dir->narrowed_message(); !narrowed.empty())
        spdlog::info("{}", narrowed);
    if (auto guarded = dir->guard_cpus(SysRoot(options.sysroot)); !guarded) {
        spdlog::error("{}", guarded.error().message);
        return 1;
    }
    // Held until the end. The unit's ExecStopPost= waits as its
    // ExecStart= does: a stop during that wait finds the lock taken.
    if (lock_runtime_dir(*dir, options.wait_for_lock) != LockWait::locked)
        return 1;
    if (auto prepared = prepare_runtime_dir(*dir, SysRoot(options.sysroot), settings); !prepared) {
        spdlog::error("{}", prepared.error().message);
        return 1;
    }
    // A latgovd that was killed left its last status: `latgov status` and
    // `latgov doctor` would show its limits as held now.
    if (auto removed = dir->remove(status_file_name); !removed)
        spdlog::warn("{}", removed.error().message);
    // So would its metrics file, served by node_exporter as current. No
    // latgovd runs on these CPUs now (the guard above); under --sysroot the
    // file may be the machine's latgovd's, and stays.
    if (SysRoot(options.sysroot).is_live() && !settings.metrics_file.empty()) {
        std::error_code removed_ec;
        if (std::filesystem::remove(settings.metrics_file, removed_ec))
            spdlog::info("Removed {}, left by a latgovd that did not stop",
                         settings.metrics_file.string());
        else if (removed_ec)
            spdlog::warn("Failed to remove {}: {}", settings.metrics_file.string(),
                         removed_ec.message());
    }
    return 0;
}

// A start puts back what a killed latgovd left before anything else, and a
// bad configuration ends latgovd before that: the CPUs the killed run held
// would stay constrained until a start with a good one (outside systemd no
// ExecStopPost= runs `latgovd --restore`). So the same restore runs here.
void restore_before_exit(const Options& options, const Result<Config>& config) {
    if (options.dry_run)
        return; // no restore, as --dry-run promises
    const auto runtime_dir = restore_settings(options, config).runtime_dir;
    // Held by a running latgovd or `latgov calibrate`: the journal is theirs.
    if (runtime_dir_locked(runtime_dir).value_or(false))
        return;
    const auto journal = runtime_dir / journal_file_name;
    struct stat st {};
    const bool journaled = ::lstat(journal.c_str(), &st) == 0;
    if (journaled)
        spdlog::info("{} is left by a latgovd that did not stop; putting back what it records "
                     "before exiting",
                     journal.string());
    // Without a journal it only removes what a killed run left besides
    // (its status, temporaries), and logs only what it changes.
    const int failed = restore(options, config);
    if (journaled && failed)
        spdlog::error("Failed to put back what {} records (see above)", journal.string());
    else if (journaled)
        spdlog::info("Put back what {} recorded", journal.string());
}

// latgovd once its log is set up: a restore, a bad configuration's exit or
// the daemon.
int run(Options options, Result<Config> config) {
    // An exception would end latgovd through std::terminate: an abort,
    // with its log not flushed. It fails with the reason logged instead.
    try {
        if (options.restore)
            return restore(options, config);
        if (!config) {
            spdlog::error("{}", config.error().message);
            sd_notifyf(0, "STATUS=Bad configuration: %s", config.error().message.c_str());
            restore_before_exit(options, config);
            return exit_config;
        }
        Daemon daemon(std::move(options), std::move(*config));
        return daemon.run();
    } catch (...) {
        spdlog::critical("Unexpected error: {}", current_exception_text());
        // A bad configuration's exit stays one: the unit does not restart it.
        return !options.restore && !config ? exit_config : 1;
    }
}

} // namespace

int main(int argc, char** argv) {
    using namespace latgov;
    // Blocked before any start-up work (configuration, restore, discovery,
    // calibration): a SIGHUP or SIGTERM then waits in the signalfd instead
    // of killing latgovd with a status systemd counts as clean.
    block_daemon_signals();
    // A closed log pipe (`latgovd | tee`, tee gone) must not kill latgovd
    // with limits held: run by hand, no ExecStopPost= restores them. The
    // write fails with EPIPE instead.
    std::signal(SIGPIPE, SIG_IGN);
    bool help = false;
    auto options = parse_options(argc, argv, help);
    if (!options)
        return help ? 0 : 2;
    auto config = load_daemon_config(*options);
    if (options->check_config) {
        if (!config) {
            fmt::print(stderr, "{}\n", config.error().message);
            return 1;
        }
        fmt::print("configuration OK ({})\n", config->sources.empty()
                                                  ? std::string("embedded default")
                                                  : config->sources.front().string());
        return 0;
    }
    setup_logging(config ? config->daemon.log_level : "info");
    const int status = run(std::move(*options), std::move(config));
    finish_logging();
    return status;
}
