// What holding a device's CPUs awake buys, learnt from the device's own live
// IO at the idle gaps its workload really has.
//
// A declared exit latency is not always the wake-up cost (haltpoll declares
// 1 us; a halt in a guest can cost 10 us back to back and 50 us or more after
// a millisecond asleep, when the host has descheduled the vCPU), and the cost
// grows with the gap the CPU sleeps through. So where the cost is unknown,
// latgovd measures the effect itself: while a queue is active and the effect
// at its current gap is uncertain, it alternates short windows with the hold
// on and off (in ABBA order, so a drift in the workload cancels), compares
// each pair, and stops as soon as the difference is clear either way. What
// it learns is kept per gap class, persisted per machine and kernel, and
// reused: a workload with a known gap is decided at once.
//
// Two measures per window pair, from /sys/block/<d>/stat deltas:
//   service = summed request time / completions: what the device path costs,
//             including the completion CPU's wake-up for the interrupt;
//   wait    = the time per completion (window length / completions) that the
//             hold saved, over the mean request time: for a workload that
//             waits for each request before the next one (the common
//             latency-bound case) the difference also holds the waiting
//             task's wake-up, and what it saved is weighed against the
//             request, not against the think time around it (1 ms of think
//             time would turn a 50 us gain on a 170 us request into 4%).
// Holding is kept when it lowers either measure by a clear margin and worsens
// neither; it is dropped when both gains are surely below the margin, or
// either is surely negative (holding must never make latency worse), or when
// no gain is sure after max_pairs (holding buys nothing measurable).
#pragma once

#include "latgov/calibration.hpp"
#include "latgov/clock.hpp"
#include "latgov/result.hpp"

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>

namespace latgov {

// --- Gaps -------------------------------------------------------------------

// Gap classes: [0, 128 us), then doubling: [128, 256), [256, 512), ...,
// [16384 us, inf) as class 8. Back-to-back IO (a gap of a few tens of us,
// which holding itself shortens) stays in class 0.
constexpr int gap_classes = 9;
int gap_class(double gap_us);
double gap_class_low_us(int cls);
double gap_class_high_us(int cls);    // infinity for the last class
std::string gap_class_label(int cls); // "128-256 us", "< 128 us", ">= 16384 us"
// A gap within this factor of a class's bounds is near the class: it does
// not move GapClassTracker out of it, and it takes the verdict of the class
// across the bound where its own has none (1 ms of think time lands there).
constexpr double gap_class_slack = 1.25;

// The current class of a drifting gap estimate, with hysteresis: it moves
// only when the gap leaves the class's bounds by more than 25%, so windows
// with and without the hold (whose gaps differ by the wake-up saved) do not
// fall into two classes, and only when two windows in a row leave it on the
// same side. One odd window is not a new workload: on the development
// machine (a 2-vCPU KVM guest with the haltpoll cpuidle driver), the one
// window with an odd gap as fio's ramp ended started an experiment that
// released the hold for 310 ms (bench/results/HISTORY.md, the run at
// f7278c6, bench/results/2026-12-01-haltpoll-vda-4/).
class GapClassTracker {
  public:
    // The class after one more window's gap; the first gap sets it.
    int update(double gap_us);
    std::optional<int> current() const { return current_; }
    // The last gap left the class, and the next one says whether that was
    // the workload changing.
    bool unconfirmed() const { return pending_.has_value(); }

  private:
    std::optional<int> current_;
    std::optional<int> pending_; // the class of an unconfirmed gap
};

// --- Windows and evidence ---------------------------------------------------

// One window of live IO on a device.
struct IoWindow {
    bool held = false;     // whether the hold was on during the window
    double seconds = 0;    // its length
    std::uint64_t ios = 0; // completions
    double busy_ms = 0;    // summed request time (stat read+write ticks)
    double cycle_us() const;
    double service_us() const;
    double gap_us() const; // cycle - service, never negative
};

// Relative gains of the hold over pairs of windows: service (off - on) /
// off; wait (cycle off - cycle on) / the pair's mean request time (the
// unheld cycle when the pair's request time is too small to measure).
struct Gains {
    int pairs = 0;
    double wait_sum = 0;
    double wait_sq = 0;
    int service_pairs = 0; // pairs whose summed request time was enough to compare
    double service_sum = 0;
    double service_sq = 0;
    // The pairs whose wait gain was above zero and below it (a tie is
    // neither), for judge's sign test. Evidence saved before these were
    // counted has none: its pairs count in the means only.
    int wait_above = 0;
    int wait_below = 0;

    // Adds the pair; false (nothing added) when either window is unusable.
    bool add(const IoWindow& on, const IoWindow& off);
    double wait_mean() const;
    double wait_se() const; // standard error of the mean
    double service_mean() const;
    double service_se() const;
};

enum class Verdict { uncertain, hold, no_hold };
std::string_view to_string(Verdict verdict);

struct EvidenceRules {
    int min_pairs = 4;  // never decide on fewer
    int max_pairs = 16; // then, no gain being sure, hold nothing
    // The confidence that makes a difference sure, as a normal quantile: 2.5
    // (one-sided 0.6%). With n pairs the standard errors are multiplied by
    // Student's t with n - 1 degrees of freedom at that confidence.
    double z = 2.5;
    double margin = 0.03; // a gain below 3% is not worth holding for
    // After the hold is switched, this long is not measured: in a guest the
    // effect of a switch takes time to show (the host adapts its own
    // polling and scheduling to how the vCPU sleeps; README.md, on the
    // learning in auto mode: on the development machine, a 2-vCPU KVM guest
    // with the haltpoll cpuidle driver, 80 ms windows flipped back to back
    // saw a sixth of the gain of a sustained hold).
    std::chrono::milliseconds settle{200};
    // A window ends once it has both, and enough requests that one more or
    // one fewer moves its cycle (time per request) by at most
    // max_cycle_step or it is long_window long; or at max_window, where one
    // with too few completions is dropped. A window counts whole requests:
    // where they come 5 ms apart, one request moves a 300 ms window's cycle
    // by 83 us, about what the hold saves there; such windows last 500 ms.
    // Requests up to 3.9 ms apart fill 300 ms with enough, and windows of
    // requests 7 ms apart or more last long_window: a burst of IO needs the
    // settle and a window to count (idle()).
    std::chrono::milliseconds min_window{300};
    std::chrono::milliseconds long_window{1000};
    std::chrono::milliseconds max_window{2000};
    std::uint64_t min_ios = 32;
    std::chrono::microseconds max_cycle_step{50};
};

// The one-sided Student t quantile with `df` degrees of freedom at the
// confidence of the normal quantile `z`; infinite below 3 degrees of freedom.
double student_t_quantile(double z, int df);

Verdict judge(const Gains& gains, const EvidenceRules& rules);

struct GapEvidence {
    Gains gains;
    Verdict verdict = Verdict::uncertain;
    // The gap class whose verdict this one carries over (see judge_at);
    // empty when the class's own pairs decided. Kept while the class is
    // measured again after such a verdict expired, until a pair says.
    std::optional<int> inferred_from;
    std::string device;         // where it was learnt
    std::int64_t learnt_at = 0; // wall clock, seconds since the epoch; 0 = not yet
    // How many times in a row measuring again came to the same verdict
    // (refresh_verdicts), and, while the class is measured again, the
    // verdict that expired.
    int confirmations = 0;
    std::optional<Verdict> expired;
};

// Everything learnt on one machine and kernel.
struct EvidenceBook {
    MachineIdentity machine;
    std::map<int, GapEvidence> gaps; // by gap class
};

// The verdict at gap class `cls` of `book` from its own gains (judge) and,
// where those stay uncertain after min_pairs, from the classes around it.
// What a hold saves is a wake-up, and a wake-up does not get cheaper after a
// longer sleep (in a guest the host deschedules a vCPU that halts longer; on
// bare metal the package reaches deeper states): so a clear gain at a
// shorter gap carries over to a longer one whose own pairs show no loss
// (no point estimate below -margin), and a clear "buys nothing" at a longer
// gap carries over to a shorter one whose own pairs show no gain above the
// margin. In bench/results/2026-11-30-haltpoll-vda-2/learnt-evidence (a
// 2-vCPU KVM guest with the haltpoll cpuidle driver), back-to-back IO
// decided "hold" in 4 pairs, and the 512-1024 us class, uncertain alone
// after 5 (wait gain +27% +- 21, service gain +3% +- 18), took it.
GapEvidence judge_at(const EvidenceBook& book, int cls, const Gains& gains,
                     const EvidenceRules& rules);

// Stamps new verdicts with `now_s` and makes verdicts older than their age
// limit uncertain again, to be measured afresh. The limit is a first life
// (`max_age` for a "hold", a quarter of it for a "no-hold": below), and
// doubles each time the class's own pairs, measured again, confirm the
// verdict, up to 2^max_confirmations first lives; a verdict overturned
// lasts a first life. A verdict carried over from another class confirms
// nothing of its own: it stands on that class's, lasts (from its own stamp)
// as long as that class's own verdict does, waits while that class is
// measured again (up to 2^max_confirmations first lives), and falls as soon
// as that class, or one between the two, decides otherwise. Each
// measurement runs half of its windows without the hold, so a machine whose
// verdicts stand is not made to pay for them every first life. What
// holding buys depends on how idle the CPUs are: a "no-hold" taken while
// other work kept them busy (README.md, on a 2-vCPU KVM guest with the
// haltpoll cpuidle driver: holding cut QD1 read latency by a third at a
// load average of 3.9 and not at all at 7.3) must not keep a quiet machine
// unheld for good, nor a "hold" taken on a quiet one keep a busy one held;
// and a verdict that noise decided (judge allows that at its confidence)
// must not stand for good either. A stamp in the future (the clock stepped
// back) is an unknown age: expired too. True when it changed.
//
// A "no-hold" lives a quarter as long (latgovd's: 2.5 minutes at first, up
// to 20, and waits up to 20 while its source is measured again): a wrong
// one costs the whole gain until it is measured again, a wrong "hold"
// costs polling only, and a measurement holds half of its windows. In the
// bench run of 2026-12-07 (bench/results/2026-12-07-haltpoll-vda, a 2-vCPU
// KVM guest with the haltpoll cpuidle driver) back-to-back IO learnt
// "no-hold" in round 1, in a minute when holding both CPUs throughout did
// not help either (QD1 4k reads: 98 us under static, 90 us with nothing
// held), and kept it for 10 minutes through two rounds in which static cut
// the same reads from 97 and 112 us to 67 and 72 us; measured again in
// round 4, it learnt "hold" in 5 pairs.
constexpr int max_confirmations = 3;
constexpr int no_hold_life_divisor = 4;
// The age limit latgovd gives verdicts: `max_age` above.
inline constexpr std::chrono::seconds verdict_max_age{600};
// The age limit of `evidence` from its own confirmations.
std::chrono::seconds verdict_age_limit(const GapEvidence& evidence, std::chrono::seconds max_age);
// The age limit of the verdict at gap class `cls` of `book`: its own, or
// where it was carried over, that of the class it was carried over from
// (the longest of its kind while that class is measured again; a first
// life of its kind where that class holds another verdict, or none, or was
// carried over itself).
std::chrono::seconds verdict_age_limit(const EvidenceBook& book, int cls,
                                       std::chrono::seconds max_age);
// The class the carried-over verdict at `cls` waits for while that class is
// measured again (its age limit is then the longest, an upper bound); empty
// otherwise.
std::optional<int> verdict_waits_for(const EvidenceBook& book, int cls);
bool refresh_verdicts(EvidenceBook& book, std::int64_t now_s, std::chrono::seconds max_age);

std::string format_evidence(const EvidenceBook& book);
Result<EvidenceBook> parse_evidence(std::string_view text, const std::string& source_name);
// load_evidence and save_evidence (the file) are at the edge: evidence_file.hpp.

// --- One device's decision --------------------------------------------------

// What HoldEvidence tells the governor for one device.
struct HoldDecision {
    bool hold = true;
    bool experimenting = false;
    // Experimenting, in the arm without the hold, while another device
    // holds some of its CPUs (so the arm cannot be measured): held instead,
    // measuring nothing, until that ends (Governor).
    bool deferred = false;
    std::optional<int> gap_class;
    // The class whose verdict decided, and that verdict's evidence: the gap's
    // own class, or the one across a bound the gap is near (see
    // gap_class_slack); empty while experimenting.
    std::optional<int> decided_by;
    GapEvidence evidence;
};

// A device's live windows, its gap and, while the effect at that gap is
// uncertain, its A/B experiment. Pure: fed tick deltas and times.
class HoldEvidence {
  public:
    // One tick of an active device: completions and summed request time
    // since the previous tick, `dt` long. The hold was as decide() said at
    // the previous tick. True when `book` gained a verdict.
    // `experiment` false: the gap is tracked (for linger), nothing is learnt.
    bool observe(std::uint64_t ios, double busy_ms, TimePoint::duration dt, EvidenceBook& book,
                 const std::string& device, const EvidenceRules& rules = {},
                 bool experiment = true);
    // The device went idle: the window in progress would measure idle time,
    // and is dropped. The pair's first window is kept: the next window of
    // the other arm completes the pair, after the idle gap (see idle()). So
    // a burst of IO counts when it lasts the settle and a window: 0.5 s
    // where requests come 1 ms apart, 0.7 s at 5 ms, 1.2 s from 7 ms on.
    void idle();
    // A tick of the arm without the hold that was held after all (another
    // device held some of the device's CPUs): the window in progress is
    // dropped, and so is the pair's first window; the next pair starts
    // without the hold (see interrupted()).
    void interrupted();
    // The gap of spans of IO too short for a window (the governor measures
    // it from one release to a later one): it moves the gap and its class
    // as a window's would, so linger and the decision follow it; nothing is
    // learnt.
    void span_gap(double gap_us);
    HoldDecision decide(const EvidenceBook& book) const;
    std::optional<double> gap_us() const { return gap_us_; }
    // The windows finished so far and the last one, for debug logs.
    std::uint64_t windows() const { return windows_; }
    const IoWindow& last_window() const { return last_window_; }

  private:
    bool finish_window(EvidenceBook& book, const std::string& device, const EvidenceRules& rules,
                       bool experiment);
    // Another workload: its experiment starts afresh.
    void restart();

    GapClassTracker tracker_;
    std::optional<double> gap_us_;
    IoWindow window_;               // in progress
    std::optional<IoWindow> first_; // the first window of the pair in progress
    // The pairs of the experiment completed so far, by the arm they
    // started with, and whether the last pair was interrupted (decide()).
    int on_first_ = 0;
    int off_first_ = 0;
    bool resume_unheld_ = false;
    std::optional<bool> last_arm_; // the hold during the previous tick
    double settled_s_ = 0;         // time under the current arm so far
    std::uint64_t windows_ = 0;
    IoWindow last_window_{};
};

// Requests less than this apart on average are a stream: auto linger holds
// through its gaps (choose_linger), and it ends a pause for isolated requests
// (Governor::isolated_requests).
inline constexpr std::chrono::milliseconds stream_gap{10};

// How long a queue stays active after its last IO. `fixed` (linger_ms set):
// that. Automatic: a stream whose requests come less than stream_gap apart
// keeps its CPUs held through its gaps (twice the mean gap, at least
// auto_linger_floor), since polling through a gap costs at most that gap
// once per request while each wake-up it saves grows with the gap; a longer
// gap is idle, released after auto_linger_floor.
std::chrono::milliseconds choose_linger(std::optional<std::chrono::milliseconds> fixed,
                                        std::optional<double> gap_us);

} // namespace latgov
