#include "latgov/calibration.hpp"

#include "latgov/parse.hpp"

#include <algorithm>
#include <fmt/format.h>
#include <sstream>
#include <toml.hpp>

namespace latgov {

namespace {

double quantile(std::vector<double> values, double q) {
    if (values.empty())
        return 0;
    std::sort(values.begin(), values.end());
    const double pos = q * static_cast<double>(values.size() - 1);
    const auto lo = static_cast<size_t>(pos);
    const size_t hi = std::min(lo + 1, values.size() - 1);
    return values[lo] + (values[hi] - values[lo]) * (pos - static_cast<double>(lo));
}

// A TOML basic string.
std::string toml_string(const std::string& s) {
    std::string out = "\"";
    for (char c : s) {
        if (c == '"' || c == '\\')
            out += '\\';
        out += c;
    }
    return out + "\"";
}

} // namespace

std::vector<CalibrationLevel> calibration_levels(const Cpu& cpu, IdleGovernorKind kind) {
    std::vector<CalibrationLevel> levels;
    levels.push_back({"poll", LatencyLimit{0}, {}, {}, 0, 0});
    if (kind == IdleGovernorKind::latency_aware) {
        for (const auto& state : cpu.idle_states) {
            if (state.disabled || state.exit_latency_us == 0)
                continue; // POLL is the "poll" level
            // A limit equal to the state's exit latency admits it and every
            // shallower state, and excludes the deeper ones.
            if (!levels.empty() && levels.back().limit == LatencyLimit{state.exit_latency_us})
                continue;
            levels.push_back({state.name, LatencyLimit{state.exit_latency_us}, {}, {}, 0, 0});
        }
        // The deepest state's level is the same as no limit: drop it.
        if (levels.size() > 1)
            levels.pop_back();
    }
    levels.push_back({"none", LatencyLimit{}, {}, {}, 0, 0});
    return levels;
}

void summarize(Calibration& c) {
    for (auto& level : c.levels) {
        level.median_us = quantile(level.samples_us, 0.5);
        level.p99_us = quantile(level.samples_us, 0.99);
    }
    if (c.levels.empty())
        return;
    const double poll = c.levels.front().median_us;
    // A state's cost is what the first level allowing it adds over poll-only.
    for (auto& state : c.states) {
        for (const auto& level : c.levels) {
            const bool allows = !level.limit || *level.limit >= state.declared_exit_latency_us;
            if (level.limit == LatencyLimit{0} && state.declared_exit_latency_us > 0)
                continue;
            if (allows) {
                state.measured_cost_us = std::max(0.0, level.median_us - poll);
                break;
            }
        }
    }
}

std::string format_calibration(const Calibration& c) {
    std::string out =
        "# latgov calibration: wake-up cost of each idle state in the IO path,\n"
        "# measured by `latgov calibrate`. latgovd uses it only on the machine below.\n";
    out += "[machine]\n";
    out += "cpu_model = " + toml_string(c.machine.cpu_model) + "\n";
    out += "kernel = " + toml_string(c.machine.kernel) + "\n";
    out += "cpuidle_driver = " + toml_string(c.machine.cpuidle_driver) + "\n";
    out += "cpuidle_governor = " + toml_string(c.machine.cpuidle_governor) + "\n\n";
    out += "[probe]\n";
    out += "device = " + toml_string(c.device) + "\n";
    out += fmt::format("cpu = {}\nsubmit_cpu = {}\nrounds = {}\nios_per_level = {}\n", c.cpu,
                       c.submit_cpu, c.rounds, c.ios_per_level);
    out += "date = " + toml_string(c.date) + "\n";
    for (const auto& level : c.levels) {
        out += "\n[[level]]\nname = " + toml_string(level.name) + "\n";
        out += "limit = " + toml_string(format_resume_latency(level.limit)) + "\n";
        out += fmt::format("median_us = {:.2f}\np99_us = {:.2f}\n", level.median_us, level.p99_us);
        out += "round_medians_us = [";
        for (size_t i = 0; i < level.round_medians_us.size(); ++i)
            out += fmt::format("{}{:.2f}", i ? ", " : "", level.round_medians_us[i]);
        out += "]\n";
    }
    for (const auto& state : c.states) {
        out += "\n[[state]]\nname = " + toml_string(state.name) + "\n";
        out += fmt::format("declared_exit_latency_us = {}\nmeasured_cost_us = {:.2f}\n",
                           state.declared_exit_latency_us, state.measured_cost_us);
    }
    out += "\n";
    out += calibration_end_marker;
    return out;
}

Result<Calibration> parse_calibration(std::string_view text, const std::string& source_name) {
    if (auto utf8 = check_toml_utf8(text, source_name); !utf8)
        return utf8.error();
    try {
        std::istringstream in{std::string(text)};
        const auto root = toml::parse(in, source_name);
        Calibration c;
        const auto& machine = toml::find(root, "machine");
        c.machine.cpu_model = toml::find<std::string>(machine, "cpu_model");
        c.machine.kernel = toml::find<std::string>(machine, "kernel");
        c.machine.cpuidle_driver = toml::find<std::string>(machine, "cpuidle_driver");
        c.machine.cpuidle_governor = toml::find<std::string>(machine, "cpuidle_governor");
        const auto& probe = toml::find(root, "probe");
        c.device = toml::find<std::string>(probe, "device");
        c.cpu = toml::find<int>(probe, "cpu");
        c.submit_cpu = toml::find<int>(probe, "submit_cpu");
        c.rounds = toml::find<int>(probe, "rounds");
        c.ios_per_level = toml::find<int>(probe, "ios_per_level");
        c.date = toml::find<std::string>(probe, "date");
        if (root.contains("level"))
            for (const auto& l : toml::find<toml::array>(root, "level")) {
                CalibrationLevel level;
                level.name = toml::find<std::string>(l, "name");
                auto limit = parse_resume_latency(toml::find<std::string>(l, "limit"));
                if (!limit)
                    return make_error(source_name + ": level " + level.name + ": " +
                                      limit.error().message);
                level.limit = *limit;
                level.median_us = toml::find<double>(l, "median_us");
                level.p99_us = toml::find<double>(l, "p99_us");
                level.round_medians_us = toml::find<std::vector<double>>(l, "round_medians_us");
                c.levels.push_back(std::move(level));
            }
        if (root.contains("state"))
            for (const auto& s : toml::find<toml::array>(root, "state"))
                c.states.push_back({toml::find<std::string>(s, "name"),
                                    toml::find<std::uint32_t>(s, "declared_exit_latency_us"),
                                    toml::find<double>(s, "measured_cost_us")});
        return c;
    } catch (const std::exception& e) {
        return make_error(std::string(e.what()));
    }
}

Result<Calibration> parse_calibration_file(std::string_view text, const std::string& source_name) {
    // A file cut short can still be valid TOML with a state missing: only
    // one that ends with the marker was written whole.
    if (!text.ends_with(calibration_end_marker))
        return make_error("Failed to load " + source_name + ": truncated (no \"" +
                          std::string(trim(calibration_end_marker)) + "\" at its end)");
    return parse_calibration(text, source_name);
}

std::map<int, std::vector<IdleCost>>
idle_costs(const Topology& topology, const Calibration* calibration, std::string& source) {
    std::map<int, std::vector<IdleCost>> costs;
    for (const auto& cpu : topology.cpus) {
        auto& list = costs[cpu.id] = declared_costs(cpu.idle_states);
        if (!calibration)
            continue;
        for (auto& cost : list)
            for (const auto& measured : calibration->states)
                if (measured.name == cost.name)
                    cost.cost_us = measured.measured_cost_us;
    }
    source = calibration ? "measured (" + calibration->device + ", " + calibration->date + ")"
                         : "declared";
    return costs;
}

} // namespace latgov
