#include "latgov/governor.hpp"

#include "latgov/parse.hpp"

#include <algorithm>
#include <fmt/format.h>
#include <limits>
#include <set>

namespace latgov {

void LatencyEstimator::add(std::uint64_t ios, std::uint64_t ticks_ms, std::uint32_t min_samples) {
    ios_ += ios;
    ticks_ms_ += ticks_ms;
    if (ios_ < std::max<std::uint64_t>(min_samples, 1) || ticks_ms_ < 10)
        return;
    const double window = static_cast<double>(ticks_ms_) * 1000.0 / static_cast<double>(ios_);
    // Smooth over windows so one slow burst does not swing the limit.
    mean_us_ = mean_us_ ? 0.5 * *mean_us_ + 0.5 * window : window;
    ios_ = 0;
    ticks_ms_ = 0;
}

std::uint64_t irq_count_delta(std::uint64_t before, std::uint64_t after) {
    const auto from = static_cast<std::uint32_t>(before);
    const auto to = static_cast<std::uint32_t>(after);
    return to >= from ? std::uint64_t{to} - from : 0;
}

DeviceIdentity device_identity(const BlockDevice& disk) {
    return {disk.name, disk.model, disk.serial, disk.wwid, disk.transport, disk.multipath_head};
}

std::vector<DeviceIdentity> device_identities(const Topology& topology) {
    std::vector<DeviceIdentity> out;
    out.reserve(topology.devices.size());
    for (const auto& disk : topology.devices)
        out.push_back(device_identity(disk));
    return out;
}

std::map<int, std::vector<IdleCost>> declared_costs(const Topology& topology) {
    std::map<int, std::vector<IdleCost>> costs;
    for (const auto& cpu : topology.cpus)
        costs[cpu.id] = declared_costs(cpu.idle_states);
    return costs;
}

namespace {

bool has_own_irqs(const BlockDevice& disk) {
    return std::any_of(disk.queues.begin(), disk.queues.end(),
                       [](const HardwareQueue& q) { return q.irq.has_value(); });
}

// A streak of lonely onsets one longer, short of overflow: at 100 onsets a
// second, an int counts for 248 days.
int one_more(int streak) {
    return streak < std::numeric_limits<int>::max() ? streak + 1 : streak;
}

// Whether one of the CPUs counted at an onset issued a request someone
// waits for since: unknown while one of them is unread and none grew.
std::optional<bool> issued_since(const std::vector<std::pair<int, std::uint64_t>>& onset,
                                 const std::vector<std::uint64_t>& now) {
    if (onset.empty())
        return std::nullopt;
    bool all_read = true;
    for (const auto& [cpu, count] : onset) {
        const auto i = static_cast<std::size_t>(cpu);
        if (i >= now.size() || now[i] == issues_unread)
            all_read = false;
        else if (now[i] > count)
            return true;
    }
    return all_read ? std::optional<bool>(false) : std::nullopt;
}

} // namespace

Governor::Governor(const Topology& topology, const Config& config,
                   std::map<int, std::vector<IdleCost>> costs, EvidenceBook evidence)
    : costs_(std::move(costs)),
      kind_(idle_governor_kind(topology.cpuidle_driver, topology.cpuidle_governor)),
      sample_interval_(config.daemon.sample_interval), book_(std::move(evidence)) {
    // A CPU whose idle table could not be read may have a deep state no
    // limit chosen from the rest would exclude: every state but POLL is
    // taken to cost too much there, so an active queue holds it at 0.
    for (const auto& cpu : topology.cpus)
        if (!cpu.idle_states_known)
            costs_[cpu.id] = {IdleCost{.name = "unknown",
                                       .exit_latency_us = 1,
                                       .cost_us = std::numeric_limits<double>::infinity()}};
    for (const auto& disk : topology.devices)
        if (auto dev = parse_kernel_dev(disk.dev)) {
            known_devs_.push_back(*dev);
            if (!disk.queues.empty())
                request_devs_.push_back(*dev); // not a bio-based multipath head
        }
    for (const auto& disk : topology.devices) {
        if (disk.queues.empty())
            continue; // a multipath head: its paths carry the IO
        const auto id = device_identity(disk);
        const DeviceRule* rule = nullptr;
        for (const auto& r : config.devices)
            if (matches(r.match, id))
                rule = &r;
        const bool nvme = disk.kind == DeviceKind::nvme;
        if (!rule && !nvme && !has_own_irqs(disk))
            continue;
        const Policy policy = resolve_policy(config, id);
        if (policy.mode == Mode::off)
            continue;
        auto kernel_dev = parse_kernel_dev(disk.dev);
        GovernedDevice device{.name = disk.name,
                              .kernel_dev = kernel_dev ? *kernel_dev : 0,
                              .transport = disk.transport,
                              .policy = policy,
                              .rule = rule ? rule->origin : std::string("default")};
        for (const auto& q : disk.queues) {
            if (q.completion_source == CompletionSource::none)
                continue; // a poll queue: its submitter completes it, awake
            device.queues.push_back({q.index, q.irq, q.completion_cpus, q.submit_cpus, {}});
        }
        if (device.queues.empty())
            continue;
        // Its own statistics, a multipath path disk's too: the kernel
        // accounts each request to the disk whose queue it runs on, and the
        // head (bio-based) keeps none before Linux 6.2, nor after it unless
        // its queue/iostats is set.
        stat_sources_.push_back(device.name);
        // Where live IO decides, what it would decide now (the first
        // tick only takes the baseline): a status written before then
        // says the same as one written after.
        if (evidence_decides(device))
            device.decision = device.evidence.decide(book_);
        devices_.push_back(std::move(device));
    }
    // IRQ -> the disks it completes, governed or not: a namespace left alone
    // (mode off) still completes its IO through its controller's queues,
    // and those interrupts are not its sibling's.
    std::map<int, std::set<std::string>> irq_users;
    for (const auto& disk : topology.devices)
        for (const auto& q : disk.queues)
            if (q.irq && q.completion_source != CompletionSource::none)
                irq_users[*q.irq].insert(disk.name);
    for (auto& device : devices_)
        for (auto& queue : device.queues)
            queue.irq_shared = queue.irq && irq_users[*queue.irq].size() > 1;
}

void Governor::rebase(const IoSample& sample, TimePoint now) {
    waiters_.rebase(sample.cpu_iowait, sample.cpu_issues, now);
    previous_ = sample;
    previous_time_ = now;
    sparse_ = false; // a blind span says nothing of the requests' spacing
    for (auto& device : devices_) {
        device.evidence.idle();
        device.was_active = false; // the next tick spans the blind one too
        device.span_from.reset();  // what the blind span counted is lost
        device.ios_before = 0;     // what it counted before is no news now
        for (auto& queue : device.queues)
            forget_span(queue);
    }
}

// The counts of a span nothing observed are lost: an onset's completion
// may be among them, and whether it had company is unknown, which must not
// bring the pause of the wake-ups closer. A window's company is told by
// the recorder, not the counters: its request stays lonely unless that saw
// company.
void Governor::forget_span(GovernedQueue& queue) {
    queue.shared_pending = 0;
    queue.onset_pending = queue.baseline_due = queue.counted_by_onset = false;
    queue.onset_base.reset();
    queue.onset_issues.clear();
    if (!queue.prearmed)
        queue.lonely = false;
}

void Governor::rebase_stats(const IoSample& sample, std::span<const std::size_t> slots) {
    if (!previous_)
        return; // the first sample is the baseline of all
    for (const auto slot : slots) {
        if (slot < previous_->devices.size() && slot < sample.devices.size())
            previous_->devices[slot] = sample.devices[slot];
        // Only what counted the device's completions lost a span: a queue
        // with an interrupt of its own kept counting its own.
        if (slot < devices_.size())
            for (auto& queue : devices_[slot].queues)
                if (!queue.irq || queue.irq_shared)
                    forget_span(queue);
    }
}

bool Governor::observe(const IoSample& sample, TimePoint now, bool idle_wakes_on_events) {
    waiters_.observe_iowait(sample.cpu_iowait, now);
    waiters_.observe_issues(sample.cpu_issues, now);
    if (!previous_) {
        previous_ = sample; // the first sample only sets the baseline
        previous_time_ = now;
        return true;
    }
    bool changed = false;
    sparse_ = false;
    const IoSample& before = *previous_;
    auto irq_delta = [&](int irq) -> std::uint64_t {
        auto i = static_cast<size_t>(irq);
        if (i >= sample.irq_counts.size() || i >= before.irq_counts.size())
            return 0;
        return irq_count_delta(before.irq_counts[i], sample.irq_counts[i]);
    };
    // A count the sample lacks is one that went down: nothing since.
    auto irq_count_now = [&](int irq) -> std::uint64_t {
        auto i = static_cast<size_t>(irq);
        return i < sample.irq_counts.size() ? sample.irq_counts[i] : 0;
    };
    size_t tag_index = 0; // queue_busy follows queue_tags(): device by device, queue by queue
    bool missed = false;  // a pre-armed window closed without its request
    // As the sample's span began: an onset released by this very sample
    // (a late tick) was active while the IO it counts completed.
    onset_counted_ = counts_watched(sample.cpu_issues);
    for (size_t s = 0; s < devices_.size(); ++s) {
        auto& device = devices_[s];
        const BlockStat& now_stat = sample.devices.at(s);
        const BlockStat& old_stat = before.devices.at(s);
        const auto delta = block_stat_delta(old_stat, now_stat);
        const std::uint64_t ios = delta.ios;
        device.latency.add(ios, delta.ticks_ms, device.policy.min_samples);
        bool released = false; // a queue of it, active before this sample, is not now
        for (auto& queue : device.queues) {
            // A completion interrupt is the queue's own sign of IO; without
            // IRQs of its own, the device's completions are.
            std::uint64_t requests = queue.irq ? irq_delta(*queue.irq) : ios;
            if (queue.irq_shared)
                requests = own_share(queue, requests, ios, device.ios_before);
            std::optional<bool> busy_here;
            if (tag_index < sample.queue_busy.size())
                busy_here = sample.queue_busy[tag_index] > 0;
            ++tag_index;
            SinceOnset since_onset;
            if (queue.onset_base)
                since_onset.completions =
                    queue.irq
                        ? irq_count_delta(queue.onset_base->irq_count, irq_count_now(*queue.irq))
                        : block_stat_delta(queue.onset_base->stat, now_stat).ios;
            since_onset.issued = issued_since(queue.onset_issues, sample.cpu_issues);
            const bool was_active = queue.activity.active;
            if (observe_queue(device, queue, requests, since_onset, now_stat.in_flight > 0,
                              busy_here, idle_wakes_on_events, now, missed))
                changed = true;
            released = released || (was_active && !queue.activity.active);
        }
        device.ios_before = ios;
        if (decide(device, ios, delta.ticks_ms, released, now))
            changed = true;
    }
    if (missed)
        periodic_.miss(); // once per window, however many queues it held
    // Every device decided: which arms without the hold wait, then the
    // limits that follow.
    defer_unheld_arms();
    for (auto& device : devices_)
        if (update_limits(device))
            changed = true;
    // What the span until the next sample holds, for the experiments.
    for (auto& device : devices_)
        device.others_held = unheld_arm(device) && held_by_others(device);
    previous_ = sample;
    previous_time_ = now;
    return changed;
}

// A shared interrupt is this device's only if its own completions moved
// too, in this sample or the one before: the interrupt count and the stat
// file are read one after the other, and a completion may fall between, on
// either side. Interrupts seen without them wait one sample for them.
// (While both devices have IO, each takes the other's interrupts: telling
// them apart needs per-request events.)
std::uint64_t Governor::own_share(GovernedQueue& queue, std::uint64_t interrupts, std::uint64_t ios,
                                  std::uint64_t ios_before) {
    if (ios == 0 && ios_before == 0) {
        queue.shared_pending = interrupts;
        return 0;
    }
    const std::uint64_t pending = ios > 0 ? queue.shared_pending : 0;
    queue.shared_pending = 0;
    return interrupts + pending;
}

bool Governor::observe_queue(const GovernedDevice& device, GovernedQueue& queue,
                             std::uint64_t requests, SinceOnset since_onset, bool device_in_flight,
                             std::optional<bool> busy_here, bool idle_wakes_on_events,
                             TimePoint now, bool& missed) {
    // Counted by an onset when a sample activated it: while the counts it
    // took over stay known and unchanged (see watch_if_counted).
    if (queue.counted_by_onset && since_onset.issued != std::optional<bool>(false))
        queue.counted_by_onset = false;
    // The first sample after an onset counts from its baseline where one
    // was read: the span before it holds the idle time up to the onset,
    // and with it the IO the events leave out (writeback, journal commits,
    // latgovd's own), which is neither the onset's company nor news.
    // Nothing in flight at the baseline: the onset's request had completed
    // by then, and is in the baseline, where this queue counted it. Its
    // interrupt was, where the queue counts those: the IRQ comes first.
    // The stat's own completion count may lag its in-flight count (a loop
    // device's stat, read over and over beside reads one at a time, showed
    // nothing in flight and the read not yet counted in about 1 of 20 falls
    // of its in-flight count to 0): there the read's own completion after
    // the baseline passes for company, which only puts the pause off.
    const auto& base_count = since_onset.completions;
    const bool own_before_base =
        base_count && queue.onset_base->stat.in_flight == 0 && requests > 0;
    queue.baseline_due = false; // not read by now: this sample is the first
    if (base_count) {
        requests = *base_count;
        queue.onset_base.reset();
    }
    if (requests > 0 || own_before_base)
        queue.own_io = now;
    // The request that activated it. Its completion count and its in-flight
    // state are not read at one instant (not even within one stat file), so
    // the sample that counts its completion may find it in flight still.
    const bool onset_completed_now = queue.onset_pending && (own_before_base || requests > 0);
    if (onset_completed_now) {
        if (!own_before_base)
            --requests;
        queue.onset_pending = false;
    }
    // Requests in flight: counted on this very queue where that is read
    // (the tag set of a queue whose IRQ is shared is shared too, so there
    // only while its own device has requests in flight); else the device's
    // count keeps an active queue so, within in_flight_bound of its own
    // last completion, its activation or a pre-armed window's request (the
    // window opens up to a fifth of a period before it: twice the spread
    // and latgovd's lateness, each up to a tenth), and stands for the
    // queue's own where it has no IRQ.
    const bool busy_own = busy_here && *busy_here && (!queue.irq_shared || device_in_flight);
    bool in_flight = false;
    if (busy_here) {
        in_flight = busy_own;
    } else if (!queue.irq) {
        in_flight = device_in_flight;
    } else if (queue.activity.active) {
        TimePoint since = std::max(queue.own_io, queue.activity.active_since);
        if (queue.prearmed && queue.prearm_seen)
            since = std::max(since, queue.prearm_seen_at);
        in_flight = device_in_flight && now - since < in_flight_bound;
    }
    bool io_seen = requests > 0 || in_flight;
    if (idle_wakes_on_events && !queue.activity.active)
        io_seen = false;
    if (io_seen && !queue.activity.active && !idle_wakes_on_events && isolated_requests()) {
        // Sampling because requests came alone: only a stream ends that,
        // requests closer together than a stream's gap (stream_requests at
        // least: a sample may follow the last one closely).
        const auto bound = std::max<std::chrono::nanoseconds>(linger_of(device), stream_gap);
        if (requests >= static_cast<std::uint64_t>(stream_requests) &&
            static_cast<double>(requests) * static_cast<double>(bound.count()) >
                static_cast<double>((now - previous_time_).count()))
            lonely_streak_ = 0;
        else
            io_seen = false;
    }
    // Company for the onset request: another one completed, or one in
    // flight in a sample after the one that counted the onset's own
    // completion. Where the issue counts of the onset CPU and of the
    // queue's disarmed submit CPUs are read, those tell instead: another
    // submit CPU's request someone waits for fires its event (still
    // armed: on_request_issued), and a completion or a request in flight
    // besides is IO nobody waits for (writeback, asynchronous writes).
    // While a window is open the events record every request
    // (on_recorded_request): a second one makes a pair, a third a stream;
    // the counters would count completions since the last sample, before
    // the window.
    const bool company = since_onset.issued ? *since_onset.issued
                                            : requests > 0 || (in_flight && !queue.onset_pending &&
                                                               !onset_completed_now);
    if (!queue.prearmed && company)
        queue.lonely = false;
    // A completion counted by a sample whose span began in the window is
    // the window's request's (the window opens with no sample), where the
    // queue counts its own on an interrupt no other disk shares: else its
    // count is its device's, or another disk's may be in it.
    const bool completed_in_window = queue.prearmed && requests > 0 && queue.irq &&
                                     !queue.irq_shared && previous_time_ >= queue.prearm_opened;
    if (release_prearmed(queue, in_flight, busy_own || completed_in_window, now, missed))
        return true;
    // A pre-armed window waiting for its request outlasts the linger, and
    // so does one whose request came after this sample's time: the next
    // sample tells whether it completed.
    if (queue.prearmed && (!queue.prearm_seen || queue.prearm_seen_at >= now))
        io_seen = true;
    const auto linger = linger_of(device);
    const Transition t = update_activity(queue.activity, io_seen, now, linger);
    // Fewer requests than one per linger: see sparse_requests(). A request
    // in flight keeps the queue whatever the tick.
    const auto spacing = std::max<std::chrono::nanoseconds>(linger, sample_interval_);
    if (queue.activity.active && !in_flight &&
        static_cast<double>(requests) * static_cast<double>(spacing.count()) <
            sparse_margin * static_cast<double>((now - previous_time_).count()))
        sparse_ = true;
    if (t == Transition::activated) {
        queue.activation = ++activations_;
        watch_if_counted(queue);
    }
    if (t == Transition::released) {
        // A pair in a window lingered, and no third request came: it leaves
        // the streak as it is.
        const bool pair = queue.prearmed && queue.prearm_company > 0;
        end_activation(queue, !queue.lonely ? Streak::company
                              : pair        ? Streak::keep
                                            : Streak::lonely);
    }
    return t != Transition::none;
}

// The issue counts the active queues watch (onset_issues), by CPU, the
// earliest where two watch one; only those read in `now` that have not
// grown since (a grown one saw company, an unread one may have).
std::vector<std::pair<int, std::uint64_t>>
Governor::counts_watched(const std::vector<std::uint64_t>& now) const {
    std::vector<std::pair<int, std::uint64_t>> watched;
    for (const auto& device : devices_)
        for (const auto& queue : device.queues)
            if (queue.activity.active)
                watched.insert(watched.end(), queue.onset_issues.begin(), queue.onset_issues.end());
    std::sort(watched.begin(), watched.end());
    watched.erase(std::unique(watched.begin(), watched.end(),
                              [](const auto& a, const auto& b) { return a.first == b.first; }),
                  watched.end());
    std::erase_if(watched, [&](const auto& count) {
        const auto i = static_cast<std::size_t>(count.first);
        return i >= now.size() || now[i] == issues_unread || now[i] > count.second;
    });
    return watched;
}

// A queue a sample activated: counted_by_onset where every submit CPU of
// it was watched as the sample began, and from then on it watches those
// counts itself, for as long as it stays active.
void Governor::watch_if_counted(GovernedQueue& queue) {
    queue.onset_issues.clear();
    for (int cpu : queue.submit_cpus) {
        const auto count = std::find_if(onset_counted_.begin(), onset_counted_.end(),
                                        [&](const auto& c) { return c.first == cpu; });
        if (count == onset_counted_.end()) {
            queue.onset_issues.clear();
            break;
        }
        queue.onset_issues.push_back(*count);
    }
    queue.counted_by_onset = !queue.onset_issues.empty();
}

void Governor::end_activation(GovernedQueue& queue, Streak effect) {
    queue.activity.active = false;
    // Its IO was none of an onset's company: see counted_by_onset.
    if (effect == Streak::company && queue.counted_by_onset)
        effect = Streak::keep;
    // The other queue of a CPU that submits to two (a read queue and the
    // default one) is activated by the same request: one request counts
    // once, on the queue that completed it.
    if (queue.own_io < queue.activity.active_since)
        effect = Streak::keep;
    // Nor twice where both took a completion for their own (each counted
    // one before its baseline, the request's or the background's): one
    // activation's lonely end counts once. Company counts on either.
    if (effect == Streak::lonely && queue.activation == streak_counted_)
        effect = Streak::keep;
    switch (effect) {
    case Streak::keep:
        break;
    case Streak::lonely:
        lonely_streak_ = one_more(lonely_streak_);
        streak_counted_ = queue.activation;
        break;
    case Streak::company:
        lonely_streak_ = 0;
        break;
    }
    queue.lonely = queue.onset_pending = queue.baseline_due = queue.counted_by_onset = false;
    queue.onset_base.reset();
    queue.onset_issues.clear();
    queue.prearmed = queue.prearm_seen = false;
    queue.prearm_company = 0;
}

bool Governor::decide(GovernedDevice& device, std::uint64_t ios, std::uint64_t ticks_ms,
                      bool released, TimePoint now) {
    bool changed = false;
    const bool active = std::any_of(device.queues.begin(), device.queues.end(),
                                    [](const GovernedQueue& q) { return q.activity.active; });
    // Spans of IO too short for a window (a stream whose gaps outlast the
    // linger is released between its requests) still show the gap: from one
    // release to a later one, the time per request completed in between
    // (at least span_min_ios of them). Counted from a release, not from an
    // onset: an idle daemon does not sample until a request wakes it, and
    // a tick before an onset is not where the idle before it began. Where
    // a window finished in between, it measured the gap better. A queue
    // that a request's event activated after the last sample was not
    // active at it: its release shows only in `released`.
    device.span_ios += ios;
    device.span_busy_ms += static_cast<double>(ticks_ms);
    if (!active && (device.was_active || released)) {
        const bool counted = device.span_from && device.span_windows == device.evidence.windows();
        if (!counted || device.span_ios >= span_min_ios) {
            if (counted) {
                const IoWindow span{
                    .seconds = std::chrono::duration<double>(now - *device.span_from).count(),
                    .ios = device.span_ios,
                    .busy_ms = device.span_busy_ms};
                device.evidence.span_gap(span.gap_us());
            }
            device.span_from = now;
            device.span_ios = 0;
            device.span_busy_ms = 0;
            device.span_windows = device.evidence.windows();
        }
    }
    // Every device tracks its gap (auto linger); only those whose idle costs
    // are unknown experiment and learn, and not under dry-run, which holds
    // nothing. Only ticks spent wholly active count: the first one after an
    // onset spans idle time too. A tick of the arm without the hold during
    // which another device held some of this one's CPUs (the strictest
    // limit wins), or that the device held itself for that reason
    // (deferred), was held after all: its window is dropped, not counted.
    const bool learning = learns(device);
    const bool spoilt =
        learning && (device.decision.deferred || (device.others_held && unheld_arm(device)));
    if (spoilt) {
        device.evidence.interrupted();
    } else if (!active) {
        device.evidence.idle();
    } else if (device.was_active) {
        if (device.evidence.observe(ios, static_cast<double>(ticks_ms), now - previous_time_, book_,
                                    device.name, {}, learning))
            evidence_changed_ = true;
    }
    device.was_active = active;
    device.decision = device.evidence.decide(book_);
    if (update_waiters(device, now))
        changed = true;
    return changed;
}

void Governor::defer_unheld_arms() {
    // A learning device in its arm without the hold whose CPUs another
    // device holds cannot measure that arm, and left unheld it would wait
    // unheld for as long as the other holds, which may be for good (a
    // fixed limit, a known "hold"), its CPUs that the other does not hold
    // included. So it holds instead, measuring nothing, and takes up the
    // arm once nothing holds them. Only holds that stand of their own
    // decide this: those of devices that hold for themselves, then those
    // of devices deferred by them, and so on. Two learning devices whose
    // arms without the hold meet are not deferred by each other, so they
    // measure that arm together; and a device in its held arm measures on
    // whoever else holds, so it ends its window and its hold.
    for (bool more = true; more;) {
        more = false;
        for (auto& device : devices_)
            if (unheld_arm(device) && held_by_others(device)) {
                device.decision.hold = true;
                device.decision.deferred = true;
                more = true;
            }
    }
}

bool Governor::update_limits(GovernedDevice& device) {
    bool changed = false;
    const LatencyLimit limit = limit_for(
        device, device.queues.front().cpus.empty() ? -1 : device.queues.front().cpus.front());
    if (!device.has_limit || limit != device.limit)
        changed = true;
    device.limit = limit;
    // CPUs with other idle-state costs may ask for another limit, and
    // change when the first one does not: each is compared.
    if (device.limit_cpus.empty()) {
        for (const auto& queue : device.queues) {
            device.limit_cpus.insert(device.limit_cpus.end(), queue.cpus.begin(), queue.cpus.end());
            device.limit_cpus.insert(device.limit_cpus.end(), queue.submit_cpus.begin(),
                                     queue.submit_cpus.end());
        }
        std::sort(device.limit_cpus.begin(), device.limit_cpus.end());
        device.limit_cpus.erase(std::unique(device.limit_cpus.begin(), device.limit_cpus.end()),
                                device.limit_cpus.end());
        device.cpu_limits.assign(device.limit_cpus.size(), std::nullopt);
    }
    for (std::size_t i = 0; i < device.limit_cpus.size(); ++i) {
        const LatencyLimit at = limit_for(device, device.limit_cpus[i]);
        if (!device.has_limit || at != device.cpu_limits[i])
            changed = true;
        device.cpu_limits[i] = at;
    }
    device.has_limit = true;
    return changed;
}

bool Governor::unheld_arm(const GovernedDevice& device) const {
    return experiments(device) && !device.decision.hold;
}

bool Governor::held_by_others(const GovernedDevice& device) const {
    const auto mine = [&device](int cpu) {
        return std::any_of(device.queues.begin(), device.queues.end(), [cpu](const auto& q) {
            return q.activity.active &&
                   (std::find(q.cpus.begin(), q.cpus.end(), cpu) != q.cpus.end() ||
                    std::find(q.waiters.begin(), q.waiters.end(), cpu) != q.waiters.end());
        });
    };
    for (const auto& other : devices_) {
        if (&other == &device || other.policy.backend == Backend::dry_run)
            continue;
        for (const auto& queue : other.queues) {
            if (!queue.activity.active)
                continue;
            for (const CpuSet* cpus : {&queue.cpus, &queue.waiters})
                for (int cpu : *cpus)
                    // A global request holds every CPU.
                    if ((other.policy.backend == Backend::global || mine(cpu)) &&
                        limit_for(other, cpu))
                        return true;
        }
    }
    return false;
}

void Governor::note_others_held() {
    for (auto& device : devices_)
        if (!device.others_held)
            device.others_held = unheld_arm(device) && held_by_others(device);
}

bool Governor::update_waiters(GovernedDevice& device, TimePoint now) {
    bool changed = false;
    for (auto& queue : device.queues) {
        CpuSet waiters;
        if (queue.activity.active && device.policy.waiter_cpus)
            waiters = waiters_.select(queue.submit_cpus, now, waiter_window);
        if (waiters != queue.waiters) {
            queue.waiters = std::move(waiters);
            changed = true;
        }
    }
    return changed;
}

namespace {

// A series' source for PeriodicOnsets: a device (its index) and a queue
// (its index there), and back. A task that moves between CPUs served by
// one queue stays one series.
std::uint64_t periodic_source(std::size_t device, int queue) {
    return std::uint64_t{device} << 32 | static_cast<std::uint32_t>(queue);
}
std::size_t source_device(std::uint64_t source) {
    return static_cast<std::size_t>(source >> 32);
}

bool submits_to(const GovernedQueue& queue, int cpu) {
    return std::binary_search(queue.submit_cpus.begin(), queue.submit_cpus.end(), cpu);
}

} // namespace

bool Governor::takes_requests_of(const GovernedDevice& device, std::uint32_t dev) const {
    // A hidden path disk whose dev_t is not known (kernel_dev 0: not in
    // /proc/diskstats) takes requests of unknown disks.
    return device.kernel_dev == dev ||
           (device.kernel_dev == 0 &&
            std::find(known_devs_.begin(), known_devs_.end(), dev) == known_devs_.end());
}

void Governor::time_request(std::size_t device, int cpu, TimePoint issued) {
    const auto& queues = devices_[device].queues;
    auto queue = std::find_if(queues.begin(), queues.end(),
                              [&](const GovernedQueue& q) { return submits_to(q, cpu); });
    if (queue == queues.end())
        return;
    periodic_.observe(periodic_source(device, queue->index), issued);
    periodic_cpu_ = cpu;
}

bool Governor::on_request_issued(std::uint32_t dev, int cpu, TimePoint now,
                                 std::optional<bool> waited, std::optional<TimePoint> issued) {
    // This CPU's event fired and is disarmed from here on. A queue it
    // submits to whose company issue counts tell, with no count of this
    // CPU's, would not see its requests: completions tell again.
    for (auto& device : devices_)
        for (auto& queue : device.queues)
            if (!queue.onset_issues.empty() && submits_to(queue, cpu) &&
                std::none_of(queue.onset_issues.begin(), queue.onset_issues.end(),
                             [&](const auto& count) { return count.first == cpu; }))
                queue.onset_issues.clear();
    // An asynchronous write (write-back started by sync_file_range, say)
    // has no task sleeping on it as it is issued: it is neither an onset,
    // nor company, nor a period's request. Where the kernel filters on
    // rwbs its event never fires (wakeup_filter).
    if (waited && !*waited)
        return false;
    bool activated = false;
    std::uint64_t activation = 0; // of every queue this request activates
    for (std::size_t d = 0; d < devices_.size(); ++d) {
        auto& device = devices_[d];
        if (!takes_requests_of(device, dev))
            continue;
        bool started = false;
        bool mapped = false; // the request went to one of its queues
        for (auto& queue : device.queues) {
            if (!submits_to(queue, cpu))
                continue;
            mapped = true;
            if (update_activity(queue.activity, true, now, linger_of(device)) ==
                Transition::activated) {
                activated = started = true;
                queue.onset_pending = queue.lonely = true;
                queue.onset_cpu = cpu;
                queue.onset_issues.clear();
                queue.activation = activation ? activation : (activation = ++activations_);
                // A shared IRQ counts another disk's completions too
                // (own_share tells them apart sample by sample): there
                // only the issue counts can be read as a baseline.
                queue.baseline_due = !queue.irq_shared || holds_waiters(device);
            } else if (!queue.prearmed) {
                // Active already: this request is another one than the one
                // that activated it (each request fires one event), and
                // the events leave out the IO nobody waits for. Company.
                queue.lonely = queue.counted_by_onset = false;
            }
        }
        // A read's or a synchronous write's submitter waits where it is,
        // at an onset or from a CPU still armed while the queue runs: held
        // now rather than at the next tick's counters. Where the kind is
        // unknown, the submitter of a request that starts a queue most
        // likely waits, and while the queue runs the issue counters tell.
        if (waited ? mapped : started)
            waiters_.observe_submit(cpu, now);
        update_waiters(device, now);
        // An onset's time is one of a period's, should the requests after
        // idle come at one.
        if (started && prearms(device))
            time_request(d, cpu, issued.value_or(now));
    }
    note_others_held(); // an onset, or a waiter's CPU, may hold what another learns at
    return activated;
}

std::vector<Governor::BaselineDue> Governor::onset_baselines_due() const {
    std::vector<BaselineDue> due;
    for (std::size_t d = 0; d < devices_.size(); ++d) {
        std::optional<BaselineDue> device;
        for (const auto& queue : devices_[d].queues) {
            if (!queue.baseline_due)
                continue;
            if (!device)
                device = BaselineDue{d, {}, {}, {}};
            if (queue.irq && !queue.irq_shared)
                device->irqs.push_back(*queue.irq);
            if (holds_waiters(devices_[d]) && queue.onset_cpu >= 0) {
                device->onset_cpus.push_back(queue.onset_cpu);
                device->submit_cpus.insert(device->submit_cpus.end(), queue.submit_cpus.begin(),
                                           queue.submit_cpus.end());
            }
        }
        if (device) {
            for (auto* cpus : {&device->onset_cpus, &device->submit_cpus}) {
                std::sort(cpus->begin(), cpus->end());
                cpus->erase(std::unique(cpus->begin(), cpus->end()), cpus->end());
            }
            due.push_back(std::move(*device));
        }
    }
    return due;
}

void Governor::take_onset_baseline(std::size_t device, const BlockStat& stat,
                                   const std::map<int, std::uint64_t>& irq_counts,
                                   const std::map<int, std::uint64_t>& issue_counts) {
    if (device >= devices_.size())
        return;
    for (auto& queue : devices_[device].queues) {
        if (!std::exchange(queue.baseline_due, false))
            continue;
        // Its submit CPUs' counts, the onset CPU's among them, or none.
        if (issue_counts.contains(queue.onset_cpu))
            for (int cpu : queue.submit_cpus)
                if (const auto count = issue_counts.find(cpu); count != issue_counts.end())
                    queue.onset_issues.emplace_back(cpu, count->second);
        if (queue.irq_shared)
            continue; // its completions are not counted from here: see own_share
        OnsetBaseline base{0, stat};
        if (queue.irq) {
            const auto count = irq_counts.find(*queue.irq);
            if (count == irq_counts.end())
                continue;
            base.irq_count = count->second;
        }
        queue.onset_base = base;
    }
}

OnsetNeeds Governor::onset_needs(std::uint32_t dev, int cpu) const {
    OnsetNeeds needs;
    for (const auto& device : devices_) {
        if (!takes_requests_of(device, dev))
            continue;
        for (const auto& queue : device.queues) {
            if (!queue.activity.active || !submits_to(queue, cpu))
                continue;
            CpuSet cpus = queue.cpus;
            if (std::binary_search(queue.waiters.begin(), queue.waiters.end(), cpu))
                cpus.push_back(cpu);
            // As holds() holds them.
            for (int c : cpus) {
                if (!limit_for(device, c))
                    continue;
                switch (device.policy.backend) {
                case Backend::percpu:
                    needs.cpus.push_back(c);
                    break;
                case Backend::dry_run:
                    needs.dry_run_cpus.push_back(c);
                    break;
                case Backend::global:
                    needs.global = true;
                    break;
                }
            }
        }
    }
    for (auto* cpus : {&needs.cpus, &needs.dry_run_cpus}) {
        std::sort(cpus->begin(), cpus->end());
        cpus->erase(std::unique(cpus->begin(), cpus->end()), cpus->end());
    }
    return needs;
}

bool Governor::prearm(TimePoint now) {
    if (!isolated_requests() || prearmed() || !periodic_.period())
        return false;
    const auto window = periodic_.next_window(now);
    if (!window || now < window->opens)
        return false;
    periodic_.opened(*window);
    window_hit_ = false;
    const std::size_t d = source_device(periodic_.source());
    if (d >= devices_.size() || !prearms(devices_[d])) {
        periodic_.miss(); // nothing to hold for it: not a window to repeat
        return false;
    }
    auto& device = devices_[d];
    bool activated = false;
    bool mapped = false;
    const std::uint64_t activation = ++activations_;
    // Every queue the CPU of the last request submits to (a read queue and
    // the default one, where a device has both).
    for (auto& queue : device.queues) {
        if (!submits_to(queue, periodic_cpu_))
            continue;
        mapped = true;
        // A queue active already holds for the request anyway.
        if (update_activity(queue.activity, true, now, linger_of(device)) != Transition::activated)
            continue;
        activated = true;
        queue.prearmed = queue.lonely = true;
        queue.activation = activation;
        queue.prearm_seen = queue.onset_pending = false;
        queue.prearm_opened = now;
        queue.prearm_closes = window->closes;
    }
    if (!mapped)
        periodic_.miss();
    if (activated) {
        // Its submitter will wait for it where it issued the last one.
        waiters_.observe_submit(periodic_cpu_, now);
        update_waiters(device, now);
        note_others_held();
    }
    return activated;
}

void Governor::on_recorded_request(std::uint32_t dev, int cpu, TimePoint issued) {
    bool after_idle = !last_recorded_ || issued - *last_recorded_ >= stream_gap;
    last_recorded_ = issued;
    for (std::size_t d = 0; d < devices_.size(); ++d) {
        auto& device = devices_[d];
        if (!takes_requests_of(device, dev) || !prearms(device))
            continue;
        bool awaited = false; // the request an open window waits for
        for (auto& queue : device.queues) {
            if (!queue.prearmed || !submits_to(queue, cpu))
                continue;
            if (queue.prearm_seen) {
                // Company in the window: a pair's, which leaves the streak
                // of lonely ones as it is, or a stream's. Either is held
                // until a sample after it.
                if (queue.prearm_company < stream_requests)
                    ++queue.prearm_company;
                if (queue.prearm_company + 1 >= stream_requests)
                    queue.lonely = false;
                queue.prearm_seen_at = std::max(queue.prearm_seen_at, issued);
            } else {
                queue.prearm_seen = awaited = true;
                queue.prearm_seen_at = issued;
            }
        }
        if (awaited)
            window_request_came();
        if (after_idle || awaited)
            time_request(d, cpu, issued);
        return;
    }
}

bool Governor::learns_periods() const {
    return std::any_of(devices_.begin(), devices_.end(),
                       [this](const GovernedDevice& d) { return prearms(d); });
}

bool Governor::may_hold(const GovernedDevice& device) const {
    switch (device.policy.mode) {
    case Mode::off:
        return false;
    case Mode::fixed:
        return true;
    case Mode::automatic:
        break;
    }
    return kind_ != IdleGovernorKind::none;
}

bool Governor::can_hold() const {
    return std::any_of(devices_.begin(), devices_.end(),
                       [this](const GovernedDevice& d) { return may_hold(d); });
}

bool Governor::holds_waiters(const GovernedDevice& device) const {
    // The global request holds every CPU already.
    return device.policy.waiter_cpus && device.policy.backend != Backend::global &&
           may_hold(device);
}

bool Governor::holds_waiters() const {
    return std::any_of(devices_.begin(), devices_.end(),
                       [this](const GovernedDevice& d) { return holds_waiters(d); });
}

bool Governor::prearms(const GovernedDevice& device) const {
    return device.policy.prearm && may_hold(device);
}

bool Governor::prearmed() const {
    return std::any_of(devices_.begin(), devices_.end(), [](const GovernedDevice& d) {
        return std::any_of(d.queues.begin(), d.queues.end(),
                           [](const GovernedQueue& q) { return q.prearmed; });
    });
}

std::optional<TimePoint> Governor::window_opens(TimePoint now) const {
    if (!isolated_requests() || prearmed() || !learns_periods())
        return std::nullopt;
    if (auto window = periodic_.next_window(now))
        return std::max(now, window->opens);
    return std::nullopt;
}

std::optional<TimePoint> Governor::window_closes() const {
    std::optional<TimePoint> closes;
    for (const auto& device : devices_)
        for (const auto& queue : device.queues)
            if (queue.prearmed && !queue.prearm_seen)
                closes = closes ? std::min(*closes, queue.prearm_closes) : queue.prearm_closes;
    return closes;
}

void Governor::window_request_came() {
    if (!window_hit_) {
        window_hit_ = true;
        periodic_.hit();
    }
}

bool Governor::release_prearmed(GovernedQueue& queue, bool in_flight, bool sampled, TimePoint now,
                                bool& missed) {
    if (!queue.prearmed)
        return false;
    if (!queue.prearm_seen) {
        if (sampled) {
            // It came, and the recorder lost it (a full ring, or disarmed
            // while the window was open).
            queue.prearm_seen = true;
            queue.prearm_seen_at = now;
            window_request_came();
            return false;
        }
        // Something in flight at the close may be its request, come while
        // the recorder was disarmed (another queue's stream ended the
        // isolation): held until it is not, within in_flight_bound of the
        // window's opening (unbounded on a queue without an IRQ, which
        // goes by its device's count), and then it counts as a hit or a
        // miss.
        if (now < queue.prearm_closes || in_flight)
            return false;
        // The window closed without its request: a miss, which is no
        // onset and leaves the streak of lonely ones as it is.
        missed = true;
        end_activation(queue, Streak::keep);
        return true;
    }
    // Requests that come alone need no linger: the next one is a period
    // away. Issued, and nothing in flight: it completed. Unless it was
    // issued after the sample's time, which is taken before the sample is
    // read: then it may have come after the tags were read, and the events
    // drained since told of it. The next sample tells. A pair lingers: a
    // third request within the linger is a stream, seen by the recorder
    // only while the window is open.
    if (isolated_requests() && queue.lonely && queue.prearm_company == 0 && !in_flight &&
        queue.prearm_seen_at < now) {
        end_activation(queue, Streak::lonely);
        return true;
    }
    return false;
}

std::vector<QueueTags> Governor::queue_tags() const {
    std::vector<QueueTags> tags;
    for (const auto& d : devices_)
        for (const auto& q : d.queues)
            tags.push_back({d.name, q.index});
    return tags;
}

template <typename Pred>
WatchedDevs Governor::devs_where(Pred wanted) const {
    WatchedDevs watched;
    for (const auto& d : devices_) {
        if (!wanted(d))
            continue;
        if (d.kernel_dev == 0)
            watched.hidden_paths = true;
        else if (std::find(watched.devs.begin(), watched.devs.end(), d.kernel_dev) ==
                 watched.devs.end())
            watched.devs.push_back(d.kernel_dev);
    }
    // Governed or not, a disk left out here is one whose requests must not
    // count (also inside the hidden paths' range).
    for (auto dev : request_devs_)
        if (std::find(watched.devs.begin(), watched.devs.end(), dev) == watched.devs.end())
            watched.others.push_back(dev);
    return watched;
}

WatchedDevs Governor::watched_devs() const {
    return devs_where([](const GovernedDevice&) { return true; });
}

WatchedDevs Governor::waiter_devs() const {
    return devs_where([this](const GovernedDevice& d) { return holds_waiters(d); });
}

bool Governor::evidence_decides(const GovernedDevice& device) const {
    // haltpoll declares 1 us for a halt that costs from ~10 us back to back
    // to 50 us and more after a longer sleep: its only cost is unknown.
    return device.policy.mode == Mode::automatic && kind_ == IdleGovernorKind::zero_only;
}

bool Governor::learns(const GovernedDevice& device) const {
    return evidence_decides(device) && device.policy.backend != Backend::dry_run;
}

std::chrono::milliseconds Governor::linger_of(const GovernedDevice& device) const {
    return choose_linger(device.policy.linger_auto
                             ? std::nullopt
                             : std::optional<std::chrono::milliseconds>(device.policy.linger),
                         device.evidence.gap_us());
}

LatencyLimit Governor::limit_for(const GovernedDevice& device, int cpu) const {
    static const std::vector<IdleCost> no_states;
    auto it = costs_.find(cpu);
    const auto& states = it == costs_.end() ? no_states : it->second;
    if (!evidence_decides(device))
        return choose_limit(device.policy, device.latency.mean_us(), device.transport, states,
                            kind_);
    if (!device.decision.hold)
        return std::nullopt;
    // The candidate: every state but POLL costs too much (an unknown cost is
    // assumed to matter), clamped as configured; the evidence said to hold.
    std::vector<IdleCost> unknown(states.begin(), states.end());
    for (auto& state : unknown)
        if (state.exit_latency_us != 0)
            state.cost_us = std::numeric_limits<double>::infinity();
    return choose_limit(device.policy, device.latency.mean_us(), device.transport, unknown, kind_);
}

std::string Governor::limit_reason(const GovernedDevice& device) const {
    switch (device.policy.mode) {
    case Mode::off:
        return "mode off";
    case Mode::fixed:
        return "mode fixed: limit_us";
    case Mode::automatic:
        break;
    }
    if (kind_ == IdleGovernorKind::none)
        return "no cpuidle driver: PM QoS cannot change how the CPUs idle, so nothing is held";
    if (!evidence_decides(device))
        return fmt::format("idle-state costs against latency_fraction {} x {} request latency",
                           device.policy.latency_fraction,
                           device.latency.mean_us() ? "the observed" : "the assumed");
    const auto& d = device.decision;
    if (d.experimenting && !learns(device))
        return fmt::format("live IO{}: uncertain, and a dry-run device holds nothing, so it "
                           "measures nothing; the hold is logged",
                           d.gap_class ? " at gaps " + gap_class_label(*d.gap_class) : "");
    if (!d.gap_class)
        return fmt::format("live IO: no gap between requests measured yet (held while the first "
                           "window measures it; {} gap classes known)",
                           std::count_if(book_.gaps.begin(), book_.gaps.end(), [](const auto& g) {
                               return g.second.verdict != Verdict::uncertain;
                           }));
    const std::string gap = gap_class_label(*d.gap_class);
    const auto figures = [](const Gains& gains) {
        return fmt::format("{} window pairs, wait {:+.1f}%, service {:+.1f}% with the hold",
                           gains.pairs, -100 * gains.wait_mean(), -100 * gains.service_mean());
    };
    if (d.experimenting || !d.decided_by) {
        auto it = book_.gaps.find(*d.gap_class);
        return fmt::format("live IO at gaps {}: uncertain, alternating windows with and without "
                           "the hold ({} so far){}",
                           gap, figures(it == book_.gaps.end() ? Gains{} : it->second.gains),
                           d.deferred ? "; held meanwhile: another device holds some of its "
                                        "CPUs, so the window without the hold waits"
                                      : "");
    }
    // The evidence that decided: the gap's own class's, or that of the class
    // across a bound the gap is near.
    const GapEvidence& e = d.evidence;
    const bool near = *d.decided_by != *d.gap_class;
    const auto gap_us = device.evidence.gap_us();
    return fmt::format(
        "live IO at gaps {}: {} ({}{}{}{})", gap,
        d.hold ? "holding buys latency" : "holding buys nothing measurable",
        near ? fmt::format(
                   "as at gaps {}, {} being near their bound: ", gap_class_label(*d.decided_by),
                   gap_us ? fmt::format("{:.0f} us", *gap_us) : std::string("the gap"))
             : std::string(),
        figures(e.gains) + (near ? " there" : ""),
        e.inferred_from ? ", undecided alone: as at gaps " + gap_class_label(*e.inferred_from)
                        : std::string(),
        e.device.empty() ? std::string() : ", learnt on " + e.device);
}

Holds Governor::holds() const {
    std::vector<QueueDemand> percpu;
    std::vector<QueueDemand> dry_run;
    std::vector<QueueDemand> global;
    // The global request constrains every CPU: aggregate it as one pseudo-CPU.
    constexpr int all_cpus = -1;
    Holds holds;
    for (const auto& device : devices_) {
        for (const auto& queue : device.queues) {
            if (!queue.activity.active)
                continue;
            std::vector<std::pair<int, HoldRole>> cpus;
            for (int cpu : queue.cpus)
                cpus.emplace_back(cpu, HoldRole::completes);
            for (int cpu : queue.waiters)
                cpus.emplace_back(cpu, HoldRole::waits);
            for (const auto& [cpu, role] : cpus) {
                if (role == HoldRole::waits && device.policy.backend == Backend::global)
                    continue; // the global request holds every CPU already
                QueueKey key{device.name, queue.index, role};
                LatencyLimit limit = limit_for(device, cpu);
                if (!limit)
                    continue;
                switch (device.policy.backend) {
                case Backend::percpu:
                    percpu.push_back({key, {cpu}, limit});
                    break;
                case Backend::dry_run:
                    dry_run.push_back({key, {cpu}, limit});
                    break;
                case Backend::global:
                    global.push_back({key, {all_cpus}, limit});
                    break;
                }
            }
        }
    }
    holds.percpu = aggregate_cpu_limits(percpu);
    holds.dry_run = aggregate_cpu_limits(dry_run);
    if (auto all = aggregate_cpu_limits(global); !all.empty()) {
        holds.global = all.begin()->second.limit;
        holds.global_for = all.begin()->second.held_for;
    }
    return holds;
}

CpuSet Governor::waiter_bound() const {
    CpuSet cpus;
    for (const auto& d : devices_)
        if (holds_waiters(d))
            for (const auto& q : d.queues)
                if (q.activity.active)
                    cpus.insert(cpus.end(), q.submit_cpus.begin(), q.submit_cpus.end());
    std::sort(cpus.begin(), cpus.end());
    cpus.erase(std::unique(cpus.begin(), cpus.end()), cpus.end());
    return cpus;
}

bool Governor::any_active() const {
    return std::any_of(devices_.begin(), devices_.end(), [](const GovernedDevice& d) {
        return std::any_of(d.queues.begin(), d.queues.end(),
                           [](const GovernedQueue& q) { return q.activity.active; });
    });
}

} // namespace latgov
