#include "latgov/calibration.hpp"

#include "latgov/parse.hpp"
#include "latgov/toml_where.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <fmt/format.h>
#include <functional>
#include <map>
#include <sstream>
#include <stdexcept>
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

// Typed reads of a calibration file with the checks a file edited by hand
// needs: toml11 alone would cast -5 to a huge unsigned number, take nan as a
// cost, and refuse a cost written as a whole number.
class CalibrationReader {
  public:
    explicit CalibrationReader(const std::string& source) : source_(source) {}

    std::string text(const toml::value& table, const std::string& key) const {
        return toml::find<std::string>(table, key);
    }

    // Whole numbers in [min, max].
    std::int64_t whole(const toml::value& table, const std::string& key, std::int64_t min,
                       std::int64_t max) const {
        const auto& value = toml::find(table, key);
        if (!value.is_integer())
            fail(value, key, "expected an integer");
        const auto number = value.as_integer();
        if (number < min || number > max)
            fail(value, key,
                 fmt::format("must be in {}..{}, got {}", min, max, toml_integer_text(number)));
        return number;
    }

    // Microseconds: a finite number >= 0, written with or without a fraction.
    double micros(const toml::value& table, const std::string& key) const {
        return micros_of(toml::find(table, key), key);
    }

    std::vector<double> micros_list(const toml::value& table, const std::string& key) const {
        const auto& value = toml::find(table, key);
        if (!value.is_array())
            fail(value, key, "expected an array of numbers");
        std::vector<double> out;
        for (const auto& item : value.as_array())
            out.push_back(micros_of(item, key));
        return out;
    }

  private:
    double micros_of(const toml::value& value, const std::string& key) const {
        if (!value.is_floating() && !value.is_integer())
            fail(value, key, "expected a number of microseconds");
        const double number =
            value.is_floating() ? value.as_floating() : static_cast<double>(value.as_integer());
        if (!std::isfinite(number) || number < 0)
            fail(value, key, fmt::format("must be a finite number >= 0, got {}", number));
        return number;
    }

    [[noreturn]] void fail(const toml::value& value, const std::string& key,
                           const std::string& what) const {
        throw std::invalid_argument(toml_where(source_, value.location()) + ": " + key + ": " +
                                    what);
    }

    const std::string& source_;
};

} // namespace

std::string cpu_model_of(std::string_view cpuinfo) {
    std::map<std::string, std::string, std::less<>> first; // the first CPU's "key : value"
    for (auto line : split(cpuinfo, '\n')) {
        if (trim(line).empty()) {
            if (!first.empty())
                break; // the end of the first CPU's block
            continue;
        }
        const auto colon = line.find(':');
        if (colon == std::string_view::npos)
            continue;
        first.try_emplace(std::string(trim(line.substr(0, colon))),
                          std::string(trim(line.substr(colon + 1))));
    }
    auto value = [&](std::string_view key) {
        const auto it = first.find(key);
        return it == first.end() ? std::string() : it->second;
    };
    if (auto model = value("model name"); !model.empty())
        return model;
    if (auto implementer = value("CPU implementer"); !implementer.empty())
        return fmt::format("CPU implementer {} part {} variant {} revision {}", implementer,
                           value("CPU part"), value("CPU variant"), value("CPU revision"));
    return value("cpu");
}

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
        const CalibrationReader read(source_name);
        constexpr std::int64_t max_cpu = 65535;
        constexpr std::int64_t max_count = 1'000'000'000;
        Calibration c;
        const auto& machine = toml::find(root, "machine");
        c.machine.cpu_model = read.text(machine, "cpu_model");
        c.machine.kernel = read.text(machine, "kernel");
        c.machine.cpuidle_driver = read.text(machine, "cpuidle_driver");
        c.machine.cpuidle_governor = read.text(machine, "cpuidle_governor");
        const auto& probe = toml::find(root, "probe");
        c.device = read.text(probe, "device");
        c.cpu = static_cast<int>(read.whole(probe, "cpu", 0, max_cpu));
        c.submit_cpu = static_cast<int>(read.whole(probe, "submit_cpu", 0, max_cpu));
        c.rounds = static_cast<int>(read.whole(probe, "rounds", 0, max_count));
        c.ios_per_level = static_cast<int>(read.whole(probe, "ios_per_level", 0, max_count));
        c.date = read.text(probe, "date");
        if (root.contains("level"))
            for (const auto& l : toml::find<toml::array>(root, "level")) {
                CalibrationLevel level;
                level.name = read.text(l, "name");
                auto limit = parse_resume_latency(read.text(l, "limit"));
                if (!limit)
                    return make_error(source_name + ": level " + level.name + ": " +
                                      limit.error().message);
                level.limit = *limit;
                level.median_us = read.micros(l, "median_us");
                level.p99_us = read.micros(l, "p99_us");
                level.round_medians_us = read.micros_list(l, "round_medians_us");
                c.levels.push_back(std::move(level));
            }
        if (root.contains("state"))
            for (const auto& s : toml::find<toml::array>(root, "state"))
                c.states.push_back({read.text(s, "name"),
                                    static_cast<std::uint32_t>(
                                        read.whole(s, "declared_exit_latency_us", 0, UINT32_MAX)),
                                    read.micros(s, "measured_cost_us")});
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
