// `latgov calibrate`: measure each idle state's wake-up cost with QD1 reads
// and write the calibration file latgovd prefers to declared latencies.
#include "commands.hpp"
#include "latgov/calibration_file.hpp"
#include "latgov/calibration_probe.hpp"
#include "latgov/config_file.hpp"
#include "latgov/parse.hpp"

#include <atomic>
#include <csignal>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <limits>
#include <optional>

namespace latgov::cli {

namespace {

std::atomic<bool> calibration_stop{false};

} // namespace

int calibrate(const Args& args) {
    // The runtime directory keeps its default, not the configuration's
    // runtime_dir: the shipped unit runs latgovd in /run/latgov whatever
    // that says, and the lock there is what keeps the two apart.
    CalibrateOptions options;
    std::optional<std::filesystem::path> config_file; // given: it must exist
    std::optional<std::filesystem::path> output;
    for (size_t i = 0; i < args.rest.size(); ++i) {
        const std::string& arg = args.rest[i];
        if (i + 1 >= args.rest.size())
            return option_error("calibrate", arg,
                                {"--device", "--cpu", "--rounds", "--ios", "--max-seconds",
                                 "--file", "--output", "--config", "--runtime-dir"});
        const std::string& value = args.rest[++i];
        auto number = [&](int& out) {
            auto parsed = parse_u64(value);
            if (!parsed || *parsed == 0 || *parsed > 1000000)
                return false;
            out = static_cast<int>(*parsed);
            return true;
        };
        int n = 0;
        if (arg == "--device")
            options.device = value;
        else if (arg == "--cpu") {
            const auto cpu = parse_u64(value);
            if (!cpu || *cpu > static_cast<std::uint64_t>(std::numeric_limits<int>::max()))
                return usage_error("calibrate: --cpu takes a CPU number, got " + value);
            options.cpu = static_cast<int>(*cpu);
        } else if (arg == "--rounds" && number(options.rounds))
            continue;
        else if (arg == "--ios" && number(options.ios_per_level))
            continue;
        else if (arg == "--max-seconds" && number(n))
            options.max_time = std::chrono::seconds(n);
        else if (arg == "--file")
            options.file = value;
        else if (arg == "--output")
            output = value;
        else if (arg == "--config")
            config_file = value;
        else if (arg == "--runtime-dir")
            options.runtime_dir = value;
        else
            return usage_error("calibrate: bad option " + arg + " " + value);
    }
    // The configuration latgovd reads: its device policy picks the disk, and
    // latgovd looks for the result at its calibration_file.
    auto config = load_config(config_file.value_or(default_config_file), config_file.has_value());
    if (!config)
        return fail(config.error().message);
    options.config = std::move(*config);
    const auto path = output.value_or(options.config.daemon.calibration_file);
    struct sigaction action {};
    action.sa_handler = [](int) { calibration_stop = true; };
    for (int sig : {SIGINT, SIGTERM, SIGHUP})
        ::sigaction(sig, &action, nullptr);
    SysRoot root(args.sysroot);
    auto calibration = run_calibration(root, options, calibration_stop);
    if (!calibration)
        return fail(calibration.error().message);
    fmt::print("{:<10} {:>8} {:>10} {:>10}   round medians\n", "LEVEL", "LIMIT", "MEDIAN_US",
               "P99_US");
    for (const auto& level : calibration->levels)
        fmt::print("{:<10} {:>8} {:>10.1f} {:>10.1f}   {:.1f}\n", terminal_safe_field(level.name),
                   format_resume_latency(level.limit), level.median_us, level.p99_us,
                   fmt::join(level.round_medians_us, " "));
    for (const auto& state : calibration->states)
        fmt::print("state {:<10} declared exit latency {:>4} us, measured cost {:.1f} us\n",
                   terminal_safe_field(state.name), state.declared_exit_latency_us,
                   state.measured_cost_us);
    if (auto saved = save_calibration(path, *calibration); !saved)
        return fail(saved.error().message);
    fmt::print("wrote {}\n", path.string());
    return 0;
}

} // namespace latgov::cli
