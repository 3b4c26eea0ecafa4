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
std::string carried_from(const JsonField& evidence) {
    const auto from = evidence.find("carried_from");
    return from ? " (as at gaps " + from->text() + ")" : std::string{};
}

// ", confirmed 2 times, measured again in 17 min" for a verdict (", waits
// while gaps X are measured again (at most N min)" for one carried over from
// a class measured again), ", measuring again (was hold)" for a class
// measured again; older status files have no such fields. Without `now_s`
// the time is left out.
std::string renewal(const JsonField& evidence, std::optional<std::int64_t> now_s) {
    // Each field is read, and so checked, whatever the text shows.
    const auto expired = evidence.find("expired");
    const auto confirmations = evidence.find("confirmations");
    const int confirmed = confirmations ? confirmations->whole<int>() : 0;
    const auto again = evidence.find("measured_again_at");
    const std::int64_t again_s = again ? again->whole<std::int64_t>() : 0;
    const auto waits_for = evidence.find("waits_for");
    const std::string waited_class = waits_for ? waits_for->text() : std::string{};
    if (expired)
        return ", measuring again (was " + expired->text() + ")";
    std::string out;
    if (confirmed > 0)
        out += fmt::format(", confirmed {} time{}", confirmed, confirmed == 1 ? "" : "s");
    std::int64_t left = 0;
    if (!again || !now_s || __builtin_sub_overflow(again_s, *now_s, &left))
        return out;
    const std::int64_t minutes = left / 60 + (left % 60 != 0);
    if (left <= 0)
        out += ", measured again now";
    else if (waits_for)
        out += fmt::format(", waits while gaps {} are measured again (at most {} min)",
                           waited_class, minutes);
    else
        out += fmt::format(", measured again in {} min", minutes);
    return out;
}

// " (14 gained, 1 lost)": of a learnt gap's pairs, how many gained the wait
// and how many lost it. Older status files have no such fields, and
// evidence saved before they were counted has 0 and 0: nothing to show.
std::string signs(const JsonField& evidence) {
    // Each field is read, and so checked, whatever the text shows.
    const auto gained = evidence.find("pairs_gained");
    const int gained_pairs = gained ? gained->whole<int>() : 0;
    const auto lost = evidence.find("pairs_lost");
    const int lost_pairs = lost ? lost->whole<int>() : 0;
    if (!gained || !lost || gained_pairs + lost_pairs == 0)
        return {};
    return fmt::format(" ({} gained, {} lost)", gained_pairs, lost_pairs);
}

// " (N us of it for latgovd's own lateness)" where windows opened late;
// older status files have no such field.
std::string late_part(const JsonField& prearm) {
    const auto late = prearm.find("late_us");
    if (!late || late->number() < 1.0)
        return {};
    return fmt::format(" ({:.0f} us of it for latgovd's own lateness)", late->number());
}

std::string limit_text(const JsonField& v) {
    if (v.is_null())
        return "-";
    const auto us = v.whole<std::uint32_t>();
    return us == 0 ? std::string("0 (poll)") : std::to_string(us);
}

// "nvme0n1/2 (completes), vda/0 (waits)", or "-".
std::string queues_text(const JsonField& list) {
    std::string out;
    for (const auto& q : list.items()) {
        const auto why = q.find("why");
        out += (out.empty() ? "" : ", ") + q.at("device").text() + "/" +
               std::to_string(q.at("queue").whole<int>()) + (why ? " (" + why->text() + ")" : "");
    }
    return out.empty() ? std::string("-") : out;
}

std::string onset_text(const JsonField& o) {
    auto us = [&o](const std::string& key) { return o.at(key).number(); };
    auto split = [&](const std::string& prefix) {
        return fmt::format("p50 {:.0f} us, p99 {:.0f} us", us(prefix + "p50_us"),
                           us(prefix + "p99_us"));
    };
    std::string out = fmt::format("Onset (first request after idle to limit written), last {}: "
                                  "{}, max {:.0f} us",
                                  o.at("count").whole<long>(), split(""), us("max_us"));
    if (o.find("wake_p50_us"))
        out +=
            fmt::format("; latgovd's wake-up {}, its own work {}", split("wake_"), split("work_"));
    if (const auto on_issuing = o.find("on_issuing_cpu"))
        out += fmt::format("; {} handled on the CPU that issued the request",
                           on_issuing->whole<long>());
    return out + "\n";
}

// A CPU a device with backend dry-run would hold (only such a CPU has
// dry_run_limit_us) shows that limit marked "(dry-run)", after the limit
// held, and its queues after those held for.
std::string cpu_table(const JsonField& cpus) {
    struct CpuRow {
        int cpu;
        std::string limit, held_s, because;
    };
    std::vector<CpuRow> rows;
    std::size_t limit_width = 10;
    for (const auto& c : cpus.items()) {
        CpuRow& row = rows.emplace_back();
        row.cpu = c.at("cpu").whole<std::uint16_t>();
        const bool held = !c.at("limit_us").is_null();
        row.limit = limit_text(c.at("limit_us"));
        const auto held_s = c.find("held_seconds");
        row.held_s = held_s ? fmt::format("{:.1f}", held_s->number()) : std::string("-");
        row.because = queues_text(c.at("held_for"));
        if (const auto dry_limit = c.find("dry_run_limit_us")) {
            const auto dry = limit_text(*dry_limit) + " (dry-run)";
            const auto dry_for = queues_text(c.at("dry_run_for"));
            row.limit = held ? row.limit + ", " + dry : dry;
            row.because = held ? row.because + "; dry-run: " + dry_for : dry_for;
        }
        limit_width = std::max(limit_width, row.limit.size());
    }
    std::string out = fmt::format("{:<5} {:<{}} {:<10} {}\n", "CPU", "LIMIT_US", limit_width,
                                  "HELD_S", "BECAUSE OF");
    for (const auto& row : rows)
        out += fmt::format("{:<5} {:<{}} {:<10} {}\n", row.cpu, row.limit, limit_width, row.held_s,
                           row.because);
    return out;
}

std::string device_table(const JsonField& devices) {
    std::string out = fmt::format("\n{:<12} {:<6} {:<8} {:<14} {:<9} {}\n", "DEVICE", "MODE",
                                  "BACKEND", "OBSERVED_US", "LIMIT_US", "ACTIVE QUEUES");
    for (const auto& d : devices.items()) {
        std::string active;
        for (const auto& q : d.at("active_queues").items())
            active += (active.empty() ? "" : ",") + std::to_string(q.whole<int>());
        const auto observed = d.at("observed_latency_us"); // null before a mean is known
        out += fmt::format("{:<12} {:<6} {:<8} {:<14} {:<9} {}\n", d.at("name").text(),
                           d.at("mode").text(), d.at("backend").text(),
                           observed.is_null() ? std::string("-")
                                              : fmt::format("{:.1f}", observed.number()),
                           limit_text(d.at("limit_us")), active.empty() ? "-" : active);
    }
    out += "\n";
    for (const auto& d : devices.items())
        if (const auto from = d.find("limit_from"))
            out += fmt::format("{}: limit from {}; linger {} ms ({})\n", d.at("name").text(),
                               from->text(), d.at("linger_ms").whole<long>(),
                               d.at("linger_from").text());
    return out;
}

std::string prearm_text(const JsonField& p) {
    const auto hits = p.at("hits").whole<long>();
    const auto misses = p.at("misses").whole<long>();
    if (p.find("period_us"))
        return fmt::format("\nPeriodic requests after idle: every {:.0f} us (spread {:.0f} us), "
                           "held from {:.0f} us before each{}; {} came in their window, {} did "
                           "not\n",
                           p.at("period_us").number(), p.at("spread_us").number(),
                           p.at("lead_us").number(), late_part(p), hits, misses);
    if (hits + misses > 0)
        return fmt::format("\nPeriodic requests after idle: no period now; {} came in their "
                           "window, {} did not\n",
                           hits, misses);
    return {};
}

} // namespace

// Every field is read through JsonField: a file that is not what latgovd
// wrote is an error naming the field ("cpus[0].held_seconds: expected a
// number, got \"x\"").
std::string format_status(const nlohmann::json& status, std::optional<std::int64_t> now_s) {
    const JsonField s(status);
    std::string out = fmt::format("latgovd pid {}, cpuidle {}/{}, idle-state costs: {}\n",
                                  s.at("pid").whole<int>(), s.at("cpuidle_driver").text(),
                                  s.at("cpuidle_governor").text(), s.at("idle_costs").text());
    if (const auto error = s.find("sampling_error"))
        out += fmt::format("NOT GOVERNING, nothing held: {}\n", error->text());
    if (const auto events = s.find("io_events"))
        out += fmt::format("IO events: {}\n", events->text());
    if (const auto onset = s.find("onset_delay"); onset && onset->at("count").whole<long>() > 0)
        out += onset_text(*onset);
    out += fmt::format("global /dev/cpu_dma_latency held by latgov: {}",
                       limit_text(s.at("global_limit_us")));
    if (const auto held = s.find("global_held_seconds"))
        out += fmt::format(" for {:.1f} s because of {}", held->number(),
                           queues_text(s.at("global_held_for")));
    out += "\n\n";
    out += cpu_table(s.at("cpus"));
    out += device_table(s.at("devices"));
    if (const auto evidence = s.find("evidence"); evidence && !evidence->items().empty()) {
        out += "\nLearnt from live IO (held vs not, relative gain of the hold):\n";
        for (const auto& e : evidence->items())
            out += fmt::format(
                "  gaps {:<14} {:<9} {:>3} pairs{}  wait {:+.1f}%  service {:+.1f}%  "
                "on {}{}{}\n",
                e.at("gap").text(), e.at("verdict").text(), e.at("pairs").whole<int>(), signs(e),
                100 * e.at("wait_gain").number(), 100 * e.at("service_gain").number(),
                e.at("device").text(), carried_from(e), renewal(e, now_s));
    }
    if (const auto prearm = s.find("prearm"))
        out += prearm_text(*prearm);
    return out;
}

} // namespace latgov
