#include "latgov/status_text.hpp"

#include "latgov/json.hpp"

#include <algorithm>
#include <fmt/format.h>
#include <string>
#include <vector>

namespace latgov {

namespace {

// " (as at gaps X)" for a verdict carried over from another gap class; older
// status files have no such field.
std::string carried_from(const nlohmann::json& evidence) {
    auto it = evidence.find("carried_from");
    if (it == evidence.end() || it->is_null())
        return {};
    return " (as at gaps " + it->get<std::string>() + ")";
}

// " (N us of it for latgovd's own lateness)" where windows opened late;
// older status files have no such field.
std::string late_part(const nlohmann::json& prearm) {
    auto it = prearm.find("late_us");
    if (it == prearm.end() || it->get<double>() < 1.0)
        return {};
    return fmt::format(" ({:.0f} us of it for latgovd's own lateness)", it->get<double>());
}

} // namespace

std::string format_status(const nlohmann::json& s) {
    auto limit = [](const nlohmann::json& v) {
        return v.is_null()                    ? std::string("-")
               : whole<std::uint32_t>(v) == 0 ? std::string("0 (poll)")
                                              : std::to_string(whole<std::uint32_t>(v));
    };
    auto queues = [](const nlohmann::json& list) {
        std::string out;
        for (const auto& q : list)
            out += (out.empty() ? "" : ", ") + q.at("device").get<std::string>() + "/" +
                   std::to_string(whole<int>(q.at("queue"))) +
                   (q.contains("why") ? " (" + q.at("why").get<std::string>() + ")" : "");
        return out.empty() ? std::string("-") : out;
    };
    std::string out = fmt::format(
        "latgovd pid {}, cpuidle {}/{}, idle-state costs: {}\n", whole<int>(s.at("pid")),
        s.at("cpuidle_driver").get<std::string>(), s.at("cpuidle_governor").get<std::string>(),
        s.at("idle_costs").get<std::string>());
    if (s.contains("sampling_error") && s.at("sampling_error").is_string())
        out += fmt::format("NOT GOVERNING, nothing held: {}\n",
                           s.at("sampling_error").get<std::string>());
    if (s.contains("io_events"))
        out += fmt::format("IO events: {}\n", s.at("io_events").get<std::string>());
    if (s.contains("onset_delay") && whole<long>(s.at("onset_delay").at("count")) > 0) {
        const auto& o = s.at("onset_delay");
        auto us = [&o](const std::string& key) { return o.at(key).get<double>(); };
        auto split = [&](const std::string& prefix) {
            return fmt::format("p50 {:.0f} us, p99 {:.0f} us", us(prefix + "p50_us"),
                               us(prefix + "p99_us"));
        };
        out += fmt::format("Onset (first request after idle to limit written), last {}: {}, max "
                           "{:.0f} us",
                           whole<long>(o.at("count")), split(""), us("max_us"));
        if (o.contains("wake_p50_us"))
            out += fmt::format("; latgovd's wake-up {}, its own work {}", split("wake_"),
                               split("work_"));
        if (o.contains("on_issuing_cpu"))
            out += fmt::format("; {} handled on the CPU that issued the request",
                               whole<long>(o.at("on_issuing_cpu")));
        out += "\n";
    }
    out += fmt::format("global /dev/cpu_dma_latency held by latgov: {}",
                       limit(s.at("global_limit_us")));
    if (s.contains("global_held_seconds"))
        out += fmt::format(" for {:.1f} s because of {}", s.at("global_held_seconds").get<double>(),
                           queues(s.at("global_held_for")));
    out += "\n\n";
    // A CPU a device with backend dry-run would hold (only such a CPU has
    // dry_run_limit_us) shows that limit marked "(dry-run)", after the limit
    // held, and its queues after those held for.
    struct CpuRow {
        int cpu;
        std::string limit, held_s, because;
    };
    std::vector<CpuRow> rows;
    std::size_t limit_width = 10;
    for (const auto& c : s.at("cpus")) {
        CpuRow& row = rows.emplace_back();
        row.cpu = whole<int>(c.at("cpu"));
        const bool held = !c.at("limit_us").is_null();
        row.limit = limit(c.at("limit_us"));
        row.held_s = c.contains("held_seconds")
                         ? fmt::format("{:.1f}", c.at("held_seconds").get<double>())
                         : std::string("-");
        row.because = queues(c.at("held_for"));
        if (c.contains("dry_run_limit_us") && !c.at("dry_run_limit_us").is_null()) {
            const auto dry = limit(c.at("dry_run_limit_us")) + " (dry-run)";
            const auto dry_for = queues(c.at("dry_run_for"));
            row.limit = held ? row.limit + ", " + dry : dry;
            row.because = held ? row.because + "; dry-run: " + dry_for : dry_for;
        }
        limit_width = std::max(limit_width, row.limit.size());
    }
    out += fmt::format("{:<5} {:<{}} {:<10} {}\n", "CPU", "LIMIT_US", limit_width, "HELD_S",
                       "BECAUSE OF");
    for (const auto& row : rows)
        out += fmt::format("{:<5} {:<{}} {:<10} {}\n", row.cpu, row.limit, limit_width, row.held_s,
                           row.because);
    out += fmt::format("\n{:<12} {:<6} {:<8} {:<14} {:<9} {}\n", "DEVICE", "MODE", "BACKEND",
                       "OBSERVED_US", "LIMIT_US", "ACTIVE QUEUES");
    for (const auto& d : s.at("devices")) {
        std::string active;
        for (const auto& q : d.at("active_queues"))
            active += (active.empty() ? "" : ",") + std::to_string(whole<int>(q));
        out += fmt::format("{:<12} {:<6} {:<8} {:<14} {:<9} {}\n", d.at("name").get<std::string>(),
                           d.at("mode").get<std::string>(), d.at("backend").get<std::string>(),
                           d.at("observed_latency_us").is_null()
                               ? std::string("-")
                               : fmt::format("{:.1f}", d.at("observed_latency_us").get<double>()),
                           limit(d.at("limit_us")), active.empty() ? "-" : active);
    }
    out += "\n";
    for (const auto& d : s.at("devices"))
        if (d.contains("limit_from"))
            out +=
                fmt::format("{}: limit from {}; linger {} ms ({})\n",
                            d.at("name").get<std::string>(), d.at("limit_from").get<std::string>(),
                            whole<long>(d.at("linger_ms")), d.at("linger_from").get<std::string>());
    if (s.contains("evidence") && !s.at("evidence").empty()) {
        out += "\nLearnt from live IO (held vs not, relative gain of the hold):\n";
        for (const auto& e : s.at("evidence"))
            out += fmt::format("  gaps {:<14} {:<9} {:>3} pairs  wait {:+.1f}%  service {:+.1f}%  "
                               "on {}{}\n",
                               e.at("gap").get<std::string>(), e.at("verdict").get<std::string>(),
                               whole<int>(e.at("pairs")), 100 * e.at("wait_gain").get<double>(),
                               100 * e.at("service_gain").get<double>(),
                               e.at("device").get<std::string>(), carried_from(e));
    }
    if (s.contains("prearm")) {
        const auto& p = s.at("prearm");
        if (p.contains("period_us"))
            out += fmt::format("\nPeriodic requests after idle: every {:.0f} us (spread {:.0f} "
                               "us), held from {:.0f} us before each{}; {} came in their window, "
                               "{} did not\n",
                               p.at("period_us").get<double>(), p.at("spread_us").get<double>(),
                               p.at("lead_us").get<double>(), late_part(p),
                               whole<long>(p.at("hits")), whole<long>(p.at("misses")));
        else if (whole<long>(p.at("hits")) + whole<long>(p.at("misses")) > 0)
            out += fmt::format("\nPeriodic requests after idle: no period now; {} came in their "
                               "window, {} did not\n",
                               whole<long>(p.at("hits")), whole<long>(p.at("misses")));
    }
    return out;
}

} // namespace latgov
