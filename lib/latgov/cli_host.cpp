#include "latgov/cli_host.hpp"

#include "latgov/calibration.hpp"
#include "latgov/config.hpp"
#include "latgov/doctor.hpp"
#include "latgov/explain.hpp"
#include "latgov/status.hpp"

#include <ctime>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>

namespace latgov {

namespace {

// latgovd's status, or null when it is not running (no file).
nlohmann::json read_status(const std::filesystem::path& path) {
    std::ifstream in(path);
    if (!in)
        return nullptr;
    auto status = nlohmann::json::parse(in, nullptr, false);
    return status.is_discarded() ? nlohmann::json(nullptr) : status;
}

int usage_error(const std::string& message) {
    fmt::print(stderr, "latgov: {}\n", message);
    return 2;
}

} // namespace

int doctor_command(const std::string& sysroot, const std::vector<std::string>& args) {
    std::filesystem::path runtime_dir = "/run/latgov";
    for (size_t i = 0; i < args.size(); ++i) {
        if (args[i] == "--runtime-dir" && i + 1 < args.size())
            runtime_dir = args[++i];
        else
            return usage_error("doctor: unknown option " + args[i]);
    }
    SysRoot root(sysroot);
    auto topology = discover_topology(root);
    if (!topology) {
        fmt::print(stderr, "latgov: {}\n", topology.error().message);
        return 1;
    }
    const auto findings =
        diagnose(read_host_facts(root, *topology, read_status(runtime_dir / "status.json")));
    fmt::print("{}", format_findings(findings));
    const bool attention = needs_attention(findings);
    fmt::print("{}\n", attention ? "Something needs attention (lines marked FIX)."
                                 : "Nothing needs attention.");
    return attention ? 1 : 0;
}

int explain_command(const std::string& sysroot, const std::vector<std::string>& args) {
    std::filesystem::path runtime_dir = "/run/latgov";
    std::filesystem::path config_file = LATGOV_CONFIG_FILE;
    std::string device;
    for (size_t i = 0; i < args.size(); ++i) {
        if (args[i] == "--runtime-dir" && i + 1 < args.size())
            runtime_dir = args[++i];
        else if (args[i] == "--config" && i + 1 < args.size())
            config_file = args[++i];
        else if (!args[i].starts_with("-") && device.empty())
            device = args[i];
        else
            return usage_error("explain: unknown option " + args[i]);
    }
    if (device.empty())
        return usage_error("explain: which DEVICE? (see `latgov topology`)");
    SysRoot root(sysroot);
    auto topology = discover_topology(root);
    if (!topology) {
        fmt::print(stderr, "latgov: {}\n", topology.error().message);
        return 1;
    }
    auto config = load_config(config_file);
    if (!config) {
        fmt::print(stderr, "latgov: {}\n", config.error().message);
        return 1;
    }
    // The costs latgovd uses: a calibration of this very machine, or the
    // declared exit latencies.
    std::optional<Calibration> calibration;
    std::string why;
    const auto& path = config->daemon.calibration_file;
    if (!std::filesystem::exists(path))
        why = "no calibration at " + path.string();
    else if (auto loaded = load_calibration(path); !loaded)
        why = "unreadable calibration: " + loaded.error().message;
    else if (loaded->machine != read_machine_identity(root, *topology))
        why = "calibration at " + path.string() + " is for another machine or kernel";
    else
        calibration = std::move(*loaded);
    std::string source = "declared";
    auto costs = idle_costs(*topology, calibration ? &*calibration : nullptr, source);
    if (!calibration)
        source = "declared exit latencies (" + why + ")";
    const auto status = read_status(runtime_dir / "status.json");
    auto text = explain_device({*topology, *config, costs, source, status}, device);
    if (!text) {
        fmt::print(stderr, "latgov: {}\n", text.error().message);
        return 1;
    }
    fmt::print("{}", *text);
    return 0;
}

std::string format_other_holders(const std::string& sysroot, const nlohmann::json& status) {
    SysRoot root(sysroot);
    std::vector<std::string> others;
    if (auto bytes = root.read("/dev/cpu_dma_latency"))
        if (auto global = parse_cpu_dma_latency(*bytes); global && *global) {
            const auto& own = status.value("global_limit_us", nlohmann::json());
            if (!own.is_number() || own.get<std::uint32_t>() != **global)
                others.push_back(fmt::format("/dev/cpu_dma_latency {} us", **global));
        }
    for (const auto& c : status.value("cpus", nlohmann::json::array())) {
        if (!c.value("limit_us", nlohmann::json()).is_null())
            continue; // latgov's own
        const int cpu = c.value("cpu", -1);
        auto text = root.read(fmt::format("/sys/devices/system/cpu/cpu{}/power/"
                                          "pm_qos_resume_latency_us",
                                          cpu));
        if (!text)
            continue;
        if (auto value = parse_resume_latency(trim(*text)); value && *value)
            others.push_back(fmt::format("cpu{} {}", cpu, format_resume_latency(*value)));
    }
    return others.empty() ? "other holders: none\n"
                          : fmt::format("other holders (kept, not governed by latgov): {}\n",
                                        fmt::join(others, ", "));
}

int watch_status(const std::string& sysroot, const std::filesystem::path& status_file,
                 std::chrono::milliseconds interval) {
    for (;;) {
        const auto status = read_status(status_file);
        const std::time_t now = std::time(nullptr);
        char stamp[32];
        std::strftime(stamp, sizeof stamp, "%H:%M:%S", std::localtime(&now));
        std::string body = status.is_object()
                               ? format_status(status) + format_other_holders(sysroot, status)
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

} // namespace latgov
