#include "latgov/waiters.hpp"

#include <algorithm>

namespace latgov {

Result<void> parse_stat_cpu_iowait(std::string_view proc_stat, std::vector<std::uint64_t>& iowait) {
    std::fill(iowait.begin(), iowait.end(), 0);
    size_t pos = 0;
    bool any = false;
    while (pos < proc_stat.size()) {
        size_t end = proc_stat.find('\n', pos);
        if (end == std::string_view::npos)
            end = proc_stat.size();
        const std::string_view line = proc_stat.substr(pos, end - pos);
        pos = end + 1;
        if (!line.starts_with("cpu"))
            break; // the cpu lines come first, together
        if (line.starts_with("cpu "))
            continue; // the sum over all CPUs
        // cpuN user nice system idle iowait ...
        std::string_view fields[6];
        size_t n = 0;
        size_t at = 0;
        while (n < 6 && at < line.size()) {
            size_t space = line.find(' ', at);
            if (space == std::string_view::npos)
                space = line.size();
            if (space > at)
                fields[n++] = line.substr(at, space - at);
            at = space + 1;
        }
        std::uint64_t cpu = 0;
        std::uint64_t value = 0;
        if (n < 6 || !parse_whole(fields[0].substr(3), cpu) || cpu > 65535)
            return make_error("bad cpu line " + in_quotes(line));
        if (!parse_whole(fields[5], value))
            return make_error("bad iowait " + in_quotes(fields[5]) + " in line " + in_quotes(line));
        if (iowait.size() <= cpu)
            iowait.resize(cpu + 1, 0);
        iowait[cpu] = value;
        any = true;
    }
    if (!any)
        return make_error("no cpuN lines");
    return {};
}

void mark_unread_issues(std::vector<std::uint64_t>& issues, const CpuSet& bound) {
    for (size_t cpu = 0; cpu < issues.size(); ++cpu)
        if (!std::binary_search(bound.begin(), bound.end(), static_cast<int>(cpu)))
            issues[cpu] = issues_unread;
}

void WaiterCpus::seen(int cpu, TimePoint now) {
    if (cpu < 0)
        return;
    const auto i = static_cast<size_t>(cpu);
    if (last_seen_.size() <= i) {
        last_seen_.resize(i + 1);
        ever_seen_.resize(i + 1, false);
        returning_.resize(i + 1, false);
    }
    if (ever_seen_[i] && now > last_seen_[i]) {
        const auto unseen = now - last_seen_[i];
        if (unseen > waiter_memory)
            returning_[i] = false;
        else if (unseen > waiter_window)
            returning_[i] = true;
    }
    last_seen_[i] = std::max(last_seen_[i], now);
    ever_seen_[i] = true;
}

void WaiterCpus::observe_growth(Counters& counters, std::span<const std::uint64_t> values,
                                TimePoint now) {
    if (counters.has_previous)
        for (size_t cpu = 0; cpu < values.size() && cpu < counters.previous.size(); ++cpu)
            if (values[cpu] != issues_unread && values[cpu] > counters.previous[cpu])
                seen(static_cast<int>(cpu), now);
    counters.previous.assign(values.begin(), values.end());
    counters.has_previous = true;
}

void WaiterCpus::observe_iowait(std::span<const std::uint64_t> iowait, TimePoint now) {
    if (iowait_.has_previous && now - iowait_.at > waiter_window)
        iowait_.has_previous = false; // a new baseline: the span is not now
    observe_growth(iowait_, iowait, now);
    iowait_.at = now;
}

void WaiterCpus::observe_issues(std::span<const std::uint64_t> issues, TimePoint now) {
    observe_growth(issues_, issues, now);
}

void WaiterCpus::rebase(std::span<const std::uint64_t> iowait,
                        std::span<const std::uint64_t> issues, TimePoint now) {
    iowait_ = {{iowait.begin(), iowait.end()}, true, now};
    issues_ = {{issues.begin(), issues.end()}, true, now};
}

void WaiterCpus::observe_submit(int cpu, TimePoint now) {
    seen(cpu, now);
}

CpuSet WaiterCpus::select(const CpuSet& bound, TimePoint now,
                          std::chrono::milliseconds window) const {
    CpuSet cpus;
    for (int cpu : bound) {
        const auto i = static_cast<size_t>(cpu);
        if (cpu < 0 || i >= last_seen_.size() || !ever_seen_[i])
            continue;
        const auto held_for = returning_[i] ? std::max(window, returning_waiter_window) : window;
        if (now - last_seen_[i] <= held_for)
            cpus.push_back(cpu);
    }
    return cpus;
}

bool WaiterCpus::any(TimePoint now, std::chrono::milliseconds window) const {
    for (size_t i = 0; i < last_seen_.size(); ++i)
        if (ever_seen_[i] && now - last_seen_[i] <= window)
            return true;
    return false;
}

} // namespace latgov
