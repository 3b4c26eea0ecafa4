// The governor's state between ticks: which queues are active, each device's
// observed request latency, and what every CPU should hold. Pure: it is fed
// samples and times, and tells the caller what to hold.
#pragma once

#include "latgov/config.hpp"
#include "latgov/cost_model.hpp"
#include "latgov/onset.hpp"
#include "latgov/periodic.hpp"
#include "latgov/policy.hpp"
#include "latgov/request_filter.hpp"
#include "latgov/sample.hpp"
#include "latgov/topology.hpp"
#include "latgov/waiters.hpp"

#include <map>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace latgov {

// Mean request latency from /sys/block/<d>/stat deltas. The kernel sums each
// request's ns-precise time and shows it in ms, so a mean is trusted only
// over enough ticks (>= 10 ms summed) and enough completions.
class LatencyEstimator {
  public:
    void add(std::uint64_t ios, std::uint64_t ticks_ms, std::uint32_t min_samples);
    std::optional<double> mean_us() const { return mean_us_; }

  private:
    std::uint64_t ios_ = 0;
    std::uint64_t ticks_ms_ = 0;
    std::optional<double> mean_us_;
};

// Interrupts between two reads of one IRQ's count in /proc/stat. The kernel
// shows each count as 32 bits, and a count starts again from 0 when its IRQ
// is freed and allocated again (a queue set up anew): the difference is
// taken modulo 2^32, and a count that went down is a reset, which says
// nothing (0), as for block_stat_delta's ticks and completions. A real wrap
// is then lost too: one tick's interrupts, once in 2^32.
std::uint64_t irq_count_delta(std::uint64_t before, std::uint64_t after);

// What an onset's baseline read (Governor::take_onset_baseline): the
// queue's completions just after its request event activated it, and
// whether its device had requests in flight then.
struct OnsetBaseline {
    std::uint64_t irq_count = 0; // its IRQ's, where it has one of its own
    BlockStat stat{};            // its device's (completions, and in flight)
};

struct GovernedQueue {
    int index = 0;
    std::optional<int> irq;
    CpuSet cpus;        // completion CPUs
    CpuSet submit_cpus; // who submits to it: maps a request's CPU to the queue
    QueueActivity activity;
    CpuSet waiters{}; // submit CPUs where its IO's waiters sleep, while active
    // Activated by a request event: the next sample's interrupts include
    // that request's completion, which is not news.
    bool onset_pending = false;
    // Activated by one request and no other seen since.
    bool lonely = false;
    // Which activation started it: one request activates every queue its
    // CPU submits to (a read queue and the default one), one window those
    // of its CPU, and each counts once in the streak of lonely ones.
    std::uint64_t activation = 0;
    // Its completions just after the event that activated it: the first
    // sample counts from there, not from the sample before, which spans
    // the idle time up to the onset, and with it the IO the events leave
    // out (writeback, journal commits, latgovd's own). Due from the
    // activation to the baseline's read or the first sample, whichever
    // comes first: a baseline read later would drop what came between.
    bool baseline_due = false;
    std::optional<OnsetBaseline> onset_base{};
    // The CPU whose request activated it, and the counts of issued
    // requests someone waits for (IssueCounters) just after the onset of
    // that CPU and of its submit CPUs whose events were disarmed, where
    // they were read (by CPU): while none grows, the queue's other
    // completions (writeback, asynchronous writes) are no company. Kept
    // for the activation; dropped when another submit CPU's event fires,
    // which disarms it with no count. A queue counted_by_onset holds the
    // counts it took over.
    int onset_cpu = -1;
    std::vector<std::pair<int, std::uint64_t>> onset_issues{};
    // Activated by a sample (completions, no request event) while each of
    // its submit CPUs was counted by an active onset's issue counts (as the
    // sample's span began: a late sample may release that onset too), none
    // grown: a request someone waits for from there would have been that
    // onset's company, so its IO is none (write-back on another governed
    // disk, say). It takes those counts over in `onset_issues`, and while
    // they stay known and unchanged its release leaves the streak of
    // lonely onsets as it is. Cleared by a count that grew or went unread,
    // or by a request event while it is active.
    bool counted_by_onset = false;
    // Activated ahead of a periodic request (PeriodicOnsets), which has
    // not been issued yet (or has: `prearm_seen`). Held until the window
    // closes without it, or until it completed.
    bool prearmed = false;
    bool prearm_seen = false;
    // Issued then (the last of its company), or found in flight by that sample.
    TimePoint prearm_seen_at{};
    int prearm_company = 0; // requests the recorder saw in the window after it
    TimePoint prearm_opened{};
    TimePoint prearm_closes{};
    // Its IRQ completes another disk's IO too, governed or not: the
    // namespaces of one controller share its queues and their interrupts.
    bool irq_shared = false;
    std::uint64_t shared_pending = 0; // its interrupts of the last sample, not yet its own
    // When its own completions last moved (its IRQ, or its device's where
    // it has none); in_flight_bound runs from this, its activation or its
    // pre-armed window's request.
    TimePoint own_io{};
};

// How long the device's in-flight count keeps an active queue with an IRQ
// of its own after its own completions stopped. The count is the device's:
// without the bound, another queue's steady IO would hold this queue's CPUs
// for as long as it runs. A request of this queue outstanding longer than
// that pays one wake-up, a few hundred microseconds at most, under 0.5% of
// its time.
inline constexpr std::chrono::milliseconds in_flight_bound{100};

// The completions from one release to a later one that measure a gap
// (Governor::decide): a few, so that one request's place between two ticks
// does not make it.
inline constexpr std::uint64_t span_min_ios = 4;

struct GovernedDevice {
    std::string name{};
    std::uint32_t kernel_dev = 0; // MAJOR << 20 | MINOR, as tracepoints show it
    std::string transport{};
    Policy policy{};
    std::string rule{}; // why it is governed: "default" or the matching entry's origin
    std::vector<GovernedQueue> queues{};
    LatencyEstimator latency{};
    LatencyLimit limit{}; // the last limit chosen (for the first completion CPU)
    bool has_limit = false;
    // Every CPU the device may hold (its queues' completion and submit
    // CPUs, sorted) and the last limit chosen for each.
    CpuSet limit_cpus{};
    std::vector<LatencyLimit> cpu_limits{};
    // Live evidence of what holding buys at this device's gap (auto mode
    // where idle-state costs are unknown), and what it says now.
    HoldEvidence evidence{};
    HoldDecision decision{};
    bool was_active = false;      // at the previous sample
    std::uint64_t ios_before = 0; // completions counted at the previous sample
    // Since a release (none before the first, or after a span nothing
    // observed): completions and summed request time, and the windows
    // finished before it; the gap between requests where spans of IO are
    // too short for a window.
    std::optional<TimePoint> span_from{};
    std::uint64_t span_ios = 0;
    double span_busy_ms = 0;
    std::uint64_t span_windows = 0;
    // In the experiment's arm without the hold, another device held some
    // of its CPUs since the last sample: the span was held after all.
    bool others_held = false;
};

// What the CPUs should hold, split by backend.
struct Holds {
    std::map<int, CpuHold> percpu;
    std::map<int, CpuHold> dry_run;
    LatencyLimit global;
    std::vector<QueueKey> global_for;
};

class Governor {
  public:
    // Picks the devices to govern: every NVMe namespace or path and every
    // disk whose queues have IRQs of their own, unless its policy is off;
    // IRQ-less disks (loop, null_blk) only when a [[device]] entry matches.
    // `costs` gives per CPU the wake-up cost of each idle state.
    // `evidence`: what earlier runs on this machine and kernel learnt.
    Governor(const Topology& topology, const Config& config,
             std::map<int, std::vector<IdleCost>> costs, EvidenceBook evidence = {});

    const std::vector<GovernedDevice>& devices() const { return devices_; }
    // The disks whose stat files the sampler must read, in sample order.
    const std::vector<std::string>& stat_sources() const { return stat_sources_; }
    // Every governed queue in order, for per-queue in-flight counts; a sample
    // whose queue_busy is filled in this order keeps busy queues active.
    std::vector<QueueTags> queue_tags() const;

    // True when what the CPUs should hold may have changed (a queue went
    // active or idle, or a device's limit moved): only then is holds() due.
    // With `idle_wakes_on_events`, an idle queue is activated only by
    // on_request_issued(), never by counters: request events then say who
    // issued IO, and latgovd's own writes (its runtime directory may sit on
    // a governed disk) must not take a hold whose release it writes again.
    bool observe(const IoSample& sample, TimePoint now, bool idle_wakes_on_events = false);
    // The first sample after a span nothing could observe (the devices
    // could not be sampled): a new baseline. What the counters gained in
    // that span activates nothing and counts as no window held; what was
    // active stays so, and lingers out as usual if no IO follows.
    void rebase(const IoSample& sample, TimePoint now);
    // The statistics of the devices at `slots` (of stat_sources()) were
    // not read until this sample, which holds their counts since boot: the
    // baseline of those alone, so the next observe() sees no IO of theirs
    // in it and the others' as usual. Their queues that count the device's
    // completions forget what they kept (forget_span).
    void rebase_stats(const IoSample& sample, std::span<const std::size_t> slots);
    // A request was issued on `dev` from `cpu`: activate the queue it went
    // to at once, before the next sample. True if a queue became active.
    // `waited` says whether its submitter waits for it (a read or a
    // synchronous write), where the request's kind is known: one nobody
    // waits for changes nothing.
    // `issued`: when it was issued, where known (the event's time), for
    // the period of requests after idle.
    bool on_request_issued(std::uint32_t dev, int cpu, TimePoint now,
                           std::optional<bool> waited = std::nullopt,
                           std::optional<TimePoint> issued = std::nullopt);
    // What a request on `dev` from `cpu` needs held, once
    // on_request_issued() has taken it: of what holds() holds for the
    // active queues it went to, the completion CPUs and `cpu` where it is
    // held as its waiter's, or the global limit.
    OnsetNeeds onset_needs(std::uint32_t dev, int cpu) const;
    // The baselines due after request events activated queues: per device
    // (its slot of stat_sources()), the IRQs of those of its queues that
    // count their own completions on one and, where the device holds
    // waiter CPUs (its queues' issue counters are read every tick while
    // they run: waiter_bound), the CPUs whose requests activated them and
    // their submit CPUs, whose counts are due where their events are
    // disarmed (an armed one fires for a request someone waits for). A
    // queue sharing its IRQ with another disk takes the issue counts alone
    // (its interrupts count the other disk's completions), where they are
    // read; one pre-armed takes none.
    struct BaselineDue {
        std::size_t device = 0;
        std::vector<int> irqs;
        CpuSet onset_cpus;
        CpuSet submit_cpus;
    };
    std::vector<BaselineDue> onset_baselines_due() const;
    // What was read for one: the device's stat file first, then the IRQ
    // counts (an IRQ missing from `irq_counts` was not read: its queue
    // counts as before, from the sample before the onset, and is due no
    // more). In that order, nothing in flight in the stat means the onset's
    // request had completed, its interrupt in the counts read after; not
    // that the stat's completions count it (see observe_queue). Then the
    // issue counts read by CPU: a queue whose onset CPU's is missing
    // tells company by completions, as without (from the sample before the
    // onset where its IRQ is shared).
    void take_onset_baseline(std::size_t device, const BlockStat& stat,
                             const std::map<int, std::uint64_t>& irq_counts,
                             const std::map<int, std::uint64_t>& issue_counts = {});
    // The devices whose requests wake an idle daemon. A hidden multipath
    // path disk whose dev_t discovery could not read (sysfs does not show
    // it; /proc/diskstats does) is told apart only as "not a disk we know"
    // (`hidden_paths`).
    WatchedDevs watched_devs() const;
    // The devices whose requests name waiter CPUs: those that hold their
    // waiters. A CPU that issues only to other disks is not taken for a
    // waiter. It does not make their requests free: a counter costs every
    // request on its CPU about the same, counted or left out by its filter
    // (docs/platform.md). Hidden path disks of unknown dev_t are told apart
    // only as a range: where one holds waiters, those that do not count too.
    WatchedDevs waiter_devs() const;
    Holds holds() const;
    bool any_active() const;
    // An active queue with nothing in flight saw fewer requests at the last
    // sample than one per its linger (per sample_interval, if that is
    // longer) on average, with sparse_margin: a gap longer than the linger
    // may hide between them. A tick of steady_interval would then see a
    // request in every tick and never release the queue (requests 15 ms
    // apart with a 3 ms linger); the daemon keeps ticking every
    // sample_interval, which sees the gaps, instead. Requests that come in
    // bunches may still hide their gaps: the test is on the average.
    bool sparse_requests() const { return sparse_; }
    // A tick is a little shorter or longer than its period: one request in
    // a tick of sample_interval is sparse (with a 3 ms linger), whatever
    // the jitter; two are not.
    static constexpr double sparse_margin = 1.25;
    // The submit CPUs of the active queues whose waiters are held (sorted):
    // where waiter evidence is worth reading.
    CpuSet waiter_bound() const;

    // Isolated requests: the last `isolated_after` queues released were
    // each activated by a request event and saw no second request. Such a
    // request completes before latgovd's hold can matter to it, while
    // waking latgovd for it costs the request itself, so an idle daemon
    // should not wake on requests but sample. Then an idle queue is
    // activated only by a sample with stream_requests or more, less than
    // stream_gap (or the device's linger, fixed or auto's, if longer)
    // apart on average, which ends the isolation.
    static constexpr int isolated_after = 8;
    // Requests close together that end the isolation: a stream. A pair is
    // not one: requests may come alone again right after it (a rate-paced
    // job that fell one request behind catches up with two together, then
    // keeps its pace), and ending the isolation for it makes latgovd wake
    // for each of the next isolated_after requests, every wake-up paid by
    // its request. A pair in a window is held for through the device's
    // linger after its last request, so that a stream's third request is
    // still seen in the window; a sample that counts two requests had seen
    // them complete already.
    static constexpr int stream_requests = 3;
    bool isolated_requests() const { return lonely_streak_ >= isolated_after; }
    int lonely_onsets() const { return lonely_streak_; }

    // Isolated requests that come at a steady period (PeriodicOnsets,
    // timed by the onsets before the isolation and by a recorder during
    // it, one series per device and queue): prearm() activates the queues
    // the last one's CPU submits to `lead` before the next is due, holding
    // their completion CPUs and (waiter_cpus) that CPU, until the request
    // has come and completed, or until the window closes without it (a
    // miss). True if it activated a queue. Devices whose policy says
    // prearm = false are left alone.
    bool prearm(TimePoint now);
    // The holds of the window prearm() opened were written at `at`: how
    // late that was widens the next windows' lead.
    void prearm_written(TimePoint at) { periodic_.written(at); }
    // When prearm() opens the next window (none while one is open, or
    // without a period, or while requests are not isolated).
    std::optional<TimePoint> window_opens(TimePoint now) const;
    // When the open window closes, its request unseen so far: a tick is
    // due then, whose recorded requests say whether it came and whose
    // sample whether it is still in flight (the sampling period follows).
    std::optional<TimePoint> window_closes() const;
    bool prearmed() const; // a window is open
    // A request the recorder saw (it wakes nobody: a wake-up would cost the
    // request itself), read at a tick: it activates nothing. It is the
    // request an open window waits for, or one after idle (stream_gap
    // since the last): either times the period.
    void on_recorded_request(std::uint32_t dev, int cpu, TimePoint issued);
    const PeriodicOnsets& periodic() const { return periodic_; }
    // Some governed device has prearm on and may hold.
    bool learns_periods() const;
    // Whether anything can ever be held for the device here: a fixed limit
    // is written wherever it is; auto needs a cpuidle driver, without which
    // PM QoS cannot change how a CPU idles.
    bool may_hold(const GovernedDevice& device) const;
    // Some governed device may hold. Without one latgovd only watches: no
    // request wakes it, it samples for the status alone.
    bool can_hold() const;
    // Some governed device may hold and holds its waiters' CPUs too.
    bool holds_waiters() const;

    // What was learnt so far; true once after it gained a verdict (time to
    // persist it).
    const EvidenceBook& evidence() const { return book_; }
    bool take_evidence_changed() { return std::exchange(evidence_changed_, false); }
    // refresh_verdicts() on what was learnt, at wall-clock time `now_s`.
    void refresh_evidence(std::int64_t now_s, std::chrono::seconds max_age) {
        if (refresh_verdicts(book_, now_s, max_age))
            evidence_changed_ = true;
    }
    // Whether the device's limit comes from live evidence (auto mode under a
    // cpuidle driver or governor whose declared costs are not wake-up costs:
    // IdleGovernorKind::zero_only).
    bool evidence_decides(const GovernedDevice& device) const;
    // Whether the device learns from its live IO: its evidence decides and
    // it holds for real (a dry-run device holds nothing, so its windows
    // with and without the hold would measure the same thing).
    bool learns(const GovernedDevice& device) const;
    // Whether it runs its experiment now: it learns, and is uncertain at
    // its gap.
    bool experiments(const GovernedDevice& device) const {
        return learns(device) && device.decision.experimenting;
    }
    // Which evidence chose the device's limit, in words, for `latgov status`.
    std::string limit_reason(const GovernedDevice& device) const;
    std::chrono::milliseconds linger_of(const GovernedDevice& device) const;

  private:
    // The governed devices `wanted` keeps, as request filters see them.
    template <typename Pred>
    WatchedDevs devs_where(Pred wanted) const;
    // Holds ahead of the device's periodic requests: its policy says so and
    // there is something to hold.
    bool prearms(const GovernedDevice& device) const;
    LatencyLimit limit_for(const GovernedDevice& device, int cpu) const;
    // The device learns and its experiment is in the arm without the hold.
    bool unheld_arm(const GovernedDevice& device) const;
    // Another device (not under dry-run) holds one of the CPUs this one
    // would hold: the completion and waiter CPUs of its active queues.
    bool held_by_others(const GovernedDevice& device) const;
    // After a queue was activated between samples: who is held by others.
    void note_others_held();
    // Of the interrupts of a queue whose IRQ is shared, those of its own
    // device's IO, given the device's completions in this sample and the
    // one before.
    static std::uint64_t own_share(GovernedQueue& queue, std::uint64_t interrupts,
                                   std::uint64_t ios, std::uint64_t ios_before);
    // A span nothing observed is over: what the queue kept of the samples
    // before it is dropped (rebase, rebase_stats).
    static void forget_span(GovernedQueue& queue);
    // One queue's part of a sample: the requests it completed since the
    // last one, whether its device has IO in flight and, where per-queue
    // counts are read, whether the queue itself has (`busy_here`). True
    // when its activity changed; `missed` when its pre-armed window closed
    // without its request.
    // `since_onset`: what counted from its onset's baseline, where one was
    // read.
    struct SinceOnset {
        std::optional<std::uint64_t> completions; // the queue's, in the first sample after
        std::optional<bool> issued;               // a request someone waits for, from a CPU counted
    };
    bool observe_queue(const GovernedDevice& device, GovernedQueue& queue, std::uint64_t requests,
                       SinceOnset since_onset, bool device_in_flight, std::optional<bool> busy_here,
                       bool idle_wakes_on_events, TimePoint now, bool& missed);
    // The device's evidence, decision and waiters once its queues are
    // observed (`released`: one that was active before it is not now);
    // true when what it holds may have changed.
    bool decide(GovernedDevice& device, std::uint64_t ios, std::uint64_t ticks_ms, bool released,
                TimePoint now);
    // Once every device decided: a learning device in the arm without the
    // hold whose CPUs others hold holds too (HoldDecision::deferred).
    void defer_unheld_arms();
    // The device's limits from its decision; true when one changed.
    bool update_limits(GovernedDevice& device);
    // The device holds the CPUs where its IO is waited for, apart from its
    // completion CPUs.
    bool holds_waiters(const GovernedDevice& device) const;
    bool update_waiters(GovernedDevice& device, TimePoint now);
    // What a queue's activation adds to the streak of lonely ones as it
    // ends: nothing, one more, or company (it starts again).
    enum class Streak { keep, lonely, company };
    // Ends the queue's activation (its linger over, its window missed, or
    // its lonely request in a window completed): the streak takes `effect`,
    // and what the activation kept (its onset, company, window) goes.
    void end_activation(GovernedQueue& queue, Streak effect);
    std::vector<std::pair<int, std::uint64_t>>
    counts_watched(const std::vector<std::uint64_t>& now) const;
    void watch_if_counted(GovernedQueue& queue);
    // A pre-armed window closed without its request (a miss), or its
    // request came alone and completed while requests are isolated: the
    // queue is released now. True if it was.
    // `sampled`: the sample saw a request of this very queue, in flight
    // or completed since the last one.
    bool release_prearmed(GovernedQueue& queue, bool in_flight, bool sampled, TimePoint now,
                          bool& missed);
    // The open window's request came: a hit, once per window however many
    // queues it held.
    void window_request_came();
    // Whether `device` takes requests of disk `dev` (a hidden multipath
    // path of unknown dev_t takes those of disks whose dev_t is not known).
    bool takes_requests_of(const GovernedDevice& device, std::uint32_t dev) const;
    // A request after idle of devices_[device] from `cpu`, for the period.
    void time_request(std::size_t device, int cpu, TimePoint issued);

    std::vector<GovernedDevice> devices_;
    std::vector<std::string> stat_sources_;
    std::vector<std::uint32_t> known_devs_;   // every disk's dev_t that discovery read
    std::vector<std::uint32_t> request_devs_; // those of them with request queues
    std::map<int, std::vector<IdleCost>> costs_;
    IdleGovernorKind kind_;
    std::optional<IoSample> previous_;
    TimePoint previous_time_{};
    std::chrono::milliseconds sample_interval_; // the daemon's shortest tick
    bool sparse_ = false;                       // sparse_requests()
    EvidenceBook book_;
    bool evidence_changed_ = false;
    WaiterCpus waiters_;
    // Activations in a row that saw one request only (a pair in a window
    // is skipped).
    int lonely_streak_ = 0;
    std::uint64_t activations_ = 0;    // GovernedQueue::activation, numbered
    std::uint64_t streak_counted_ = 0; // the last one the streak counted lonely
    // counts_watched() as the current sample began.
    std::vector<std::pair<int, std::uint64_t>> onset_counted_;
    PeriodicOnsets periodic_;
    int periodic_cpu_ = -1;   // the CPU of the series' last request: its waiter
    bool window_hit_ = false; // the open window saw its request
    std::optional<TimePoint> last_recorded_;
};

// What [[device]] matchers see of a disk, and of every disk of a topology
// (multipath heads and disks that no rule governs included).
DeviceIdentity device_identity(const BlockDevice& disk);
std::vector<DeviceIdentity> device_identities(const Topology& topology);

// The idle-state costs the kernel declares, per online CPU.
std::map<int, std::vector<IdleCost>> declared_costs(const Topology& topology);

} // namespace latgov
