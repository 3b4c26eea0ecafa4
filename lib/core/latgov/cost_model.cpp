#include "latgov/cost_model.hpp"

#include "latgov/config.hpp"
#include "latgov/parse.hpp"

#include <algorithm>
#include <cmath>
#include <fmt/format.h>
#include <limits>
#include <sstream>
#include <vector>

namespace latgov {

// --- Gaps -------------------------------------------------------------------

namespace {
constexpr double first_gap_bound_us = 128.0;
} // namespace

int gap_class(double gap_us) {
    if (!(gap_us >= first_gap_bound_us)) // also NaN
        return 0;
    const int cls = 1 + static_cast<int>(std::floor(std::log2(gap_us / first_gap_bound_us)));
    return std::min(cls, gap_classes - 1);
}

double gap_class_low_us(int cls) {
    return cls <= 0 ? 0.0 : first_gap_bound_us * std::exp2(cls - 1);
}

double gap_class_high_us(int cls) {
    return cls >= gap_classes - 1 ? std::numeric_limits<double>::infinity()
                                  : first_gap_bound_us * std::exp2(cls);
}

std::string gap_class_label(int cls) {
    if (cls <= 0)
        return fmt::format("< {:.0f} us", gap_class_high_us(0));
    if (cls >= gap_classes - 1)
        return fmt::format(">= {:.0f} us", gap_class_low_us(cls));
    return fmt::format("{:.0f}-{:.0f} us", gap_class_low_us(cls), gap_class_high_us(cls));
}

int GapClassTracker::update(double gap_us) {
    const int cls = gap_class(gap_us);
    const bool far_below = current_ && gap_us * gap_class_slack < gap_class_low_us(*current_);
    const bool far_above = current_ && gap_us > gap_class_high_us(*current_) * gap_class_slack;
    if (!current_ || (!far_below && !far_above)) {
        pending_.reset();
        current_ = current_.value_or(cls);
        return *current_;
    }
    const bool confirms = pending_ && (*pending_ < *current_) == far_below;
    if (confirms) {
        current_ = cls;
        pending_.reset();
    } else {
        pending_ = cls;
    }
    return *current_;
}

// --- Windows and evidence ---------------------------------------------------

double IoWindow::cycle_us() const {
    return ios == 0 ? 0.0 : seconds * 1e6 / static_cast<double>(ios);
}

double IoWindow::service_us() const {
    return ios == 0 ? 0.0 : busy_ms * 1e3 / static_cast<double>(ios);
}

double IoWindow::gap_us() const {
    return std::max(0.0, cycle_us() - service_us());
}

namespace {

// The stat ticks are whole milliseconds: a window's summed time is trusted
// to compare only when the rounding (< 1 ms at each end) is small next to it.
constexpr double min_busy_ms = 20.0;

double mean(double sum, int n) {
    return n == 0 ? 0.0 : sum / n;
}

double standard_error(double sum, double sq, int n) {
    if (n < 2)
        return std::numeric_limits<double>::infinity();
    const double m = sum / n;
    const double var = std::max(0.0, (sq - n * m * m) / (n - 1));
    return std::sqrt(var / n);
}

// The chance that a fair coin thrown n times shows heads k times or more.
double fair_coin_upper_tail(int n, int k) {
    if (k <= 0)
        return 1.0;
    if (2 * static_cast<std::int64_t>(k) <= n) // by symmetry, summed from the small end
        return 1.0 - fair_coin_upper_tail(n, n - k + 1);
    double p = 0;
    for (int i = k; i <= n; ++i) {
        const double term = std::exp(std::lgamma(n + 1.0) - std::lgamma(i + 1.0) -
                                     std::lgamma(n - i + 1.0) - n * std::log(2.0));
        p += term;
        if (term < p * 1e-12) // the terms only shrink past n / 2
            break;
    }
    return std::min(1.0, p);
}

// Whether the count of pairs that gained (or lost) the wait passes the sign
// test at the confidence of rules.z: a fair coin shows as many heads, of the
// pairs that were not ties, at most Phi(-z) of the time.
bool signs_show(const Gains& gains, bool gained, const EvidenceRules& rules) {
    const int signed_pairs = gains.wait_above + gains.wait_below;
    if (signed_pairs < rules.min_pairs)
        return false;
    const double alpha = 0.5 * std::erfc(rules.z / std::sqrt(2.0)); // Phi(-z)
    return fair_coin_upper_tail(signed_pairs, gained ? gains.wait_above : gains.wait_below) <=
           alpha;
}

} // namespace

double student_t_quantile(double z, int df) {
    if (df < 3)
        return std::numeric_limits<double>::infinity();
    // Hill (1970), "Algorithm 396: Student's t-quantiles", the expansion in
    // powers of 1/df: at z = 2.5 within 0.7% of the exact quantile at 3
    // degrees of freedom (5.37 against 5.41) and within 0.1% from 5 on.
    const double v = df;
    const double z2 = z * z;
    const double z3 = z2 * z, z5 = z3 * z2, z7 = z5 * z2, z9 = z7 * z2;
    return z + (z3 + z) / (4 * v) + (5 * z5 + 16 * z3 + 3 * z) / (96 * v * v) +
           (3 * z7 + 19 * z5 + 17 * z3 - 15 * z) / (384 * v * v * v) +
           (79 * z9 + 776 * z7 + 1482 * z5 - 1920 * z3 - 945 * z) / (92160 * v * v * v * v);
}

bool Gains::add(const IoWindow& on, const IoWindow& off) {
    if (on.ios == 0 || off.ios == 0 || !(off.cycle_us() > 0))
        return false;
    // The wait gain's scale is the pair's mean request time, trusted from
    // half the busy time a comparison needs: a scale off by a fifth only
    // moves the margin, the sign and significance of the gain stay.
    const double pair_busy_ms = on.busy_ms + off.busy_ms;
    const double scale = pair_busy_ms >= min_busy_ms / 2
                             ? pair_busy_ms * 1e3 / static_cast<double>(on.ios + off.ios)
                             : off.cycle_us();
    if (!(scale > 0))
        return false;
    const double c = (off.cycle_us() - on.cycle_us()) / scale;
    const bool service_known = on.busy_ms >= min_busy_ms && off.busy_ms >= min_busy_ms;
    ++pairs;
    wait_sum += c;
    wait_sq += c * c;
    wait_above += c > 0;
    wait_below += c < 0;
    if (service_known) {
        const double s = (off.service_us() - on.service_us()) / off.service_us();
        ++service_pairs;
        service_sum += s;
        service_sq += s * s;
    }
    return true;
}

double Gains::wait_mean() const {
    return mean(wait_sum, pairs);
}
double Gains::wait_se() const {
    return standard_error(wait_sum, wait_sq, pairs);
}
double Gains::service_mean() const {
    return mean(service_sum, service_pairs);
}
double Gains::service_se() const {
    return standard_error(service_sum, service_sq, service_pairs);
}

std::string_view to_string(Verdict verdict) {
    switch (verdict) {
    case Verdict::uncertain:
        return "uncertain";
    case Verdict::hold:
        return "hold";
    case Verdict::no_hold:
        return "no-hold";
    }
    return "uncertain";
}

Verdict judge(const Gains& gains, const EvidenceRules& rules) {
    if (gains.pairs < rules.min_pairs)
        return Verdict::uncertain;
    // The standard errors come from the pairs themselves: with few pairs
    // they are as uncertain as the means, and z standard errors would take
    // noise for a difference (at 4 pairs, 2.5 of them are passed by chance
    // 4.4% of the time on each side of each measure, not 0.6%). Student's
    // t at the same confidence: 5.4 standard errors at 4 pairs, 3.3 at 8.
    struct Measure {
        double mean;
        double margin_of_error; // t x standard error
        bool usable;
    };
    const Measure measures[] = {
        {gains.wait_mean(), student_t_quantile(rules.z, gains.pairs - 1) * gains.wait_se(), true},
        {gains.service_mean(),
         student_t_quantile(rules.z, gains.service_pairs - 1) * gains.service_se(),
         gains.service_pairs >= rules.min_pairs},
    };
    bool surely_better = false;
    bool surely_worse = false;
    bool surely_small = true;
    for (const Measure& m : measures) {
        if (!m.usable)
            continue;
        surely_better |= m.mean > rules.margin && m.mean - m.margin_of_error > 0;
        surely_worse |= m.mean < 0 && m.mean + m.margin_of_error < 0;
        surely_small &= m.mean + m.margin_of_error < rules.margin;
    }
    // The sign test, at the same confidence: how many pairs gained and how
    // many lost, whatever by how much. A burst of another workload's IO on
    // the disk inside one window (its requests are counted too) or a stall
    // moves that window's cycle by several times what the hold saves, and a
    // few such pairs widen the standard error until the t test shows
    // nothing. On the development machine (a 2-vCPU KVM guest with the
    // haltpoll cpuidle driver), reads with 5 ms of think time learnt
    // "no-hold" in 2 of 17 experiments, with mean wait gains of +56% and
    // +83% (bench/results/HISTORY.md), and some of that workload's windows
    // there counted a fifth more requests than their neighbours. Each such
    // pair counts once here. The mean must still pass the margin for a
    // hold, or be below zero for a loss.
    surely_better |= gains.wait_mean() > rules.margin && signs_show(gains, true, rules);
    surely_worse |= gains.wait_mean() < 0 && signs_show(gains, false, rules);
    if (surely_worse)
        return Verdict::no_hold;
    if (surely_better)
        return Verdict::hold;
    if (surely_small)
        return Verdict::no_hold;
    // Still unclear after max_pairs: no gain was shown, so nothing is held
    // ("buys nothing measurable", measured again later: refresh_verdicts).
    // A point estimate is no evidence: where the wait gain divides a cycle
    // difference by a short request, noise alone put it above the margin in
    // up to 45% of experiments with a workload that holding does not change
    // (tests/unit/test_cost_model.cpp, 6 ms gaps and 150 us requests).
    if (gains.pairs >= rules.max_pairs)
        return Verdict::no_hold;
    return Verdict::uncertain;
}

GapEvidence judge_at(const EvidenceBook& book, int cls, const Gains& gains,
                     const EvidenceRules& rules) {
    GapEvidence out;
    out.gains = gains;
    out.verdict = judge(gains, rules);
    if (out.verdict != Verdict::uncertain || gains.pairs < rules.min_pairs)
        return out;
    const bool service_usable = gains.service_pairs >= rules.min_pairs;
    // Nor do the signs of its pairs show the other way: a few pairs far off
    // can carry the mean (judge).
    const bool no_loss = gains.wait_mean() > -rules.margin &&
                         (!service_usable || gains.service_mean() > -rules.margin) &&
                         !signs_show(gains, false, rules);
    const bool no_gain = gains.wait_mean() < rules.margin &&
                         (!service_usable || gains.service_mean() < rules.margin) &&
                         !signs_show(gains, true, rules);
    // The nearest decided class on one side, when its verdict is `wanted`
    // (a nearer class that decided otherwise stands in between).
    const auto nearest = [&](Verdict wanted, int step) -> std::optional<int> {
        for (int c = cls + step; c >= 0 && c < gap_classes; c += step) {
            auto it = book.gaps.find(c);
            if (it == book.gaps.end() || it->second.verdict == Verdict::uncertain)
                continue;
            if (it->second.verdict == wanted)
                return c;
            return std::nullopt;
        }
        return std::nullopt;
    };
    if (no_loss)
        if (auto shorter = nearest(Verdict::hold, -1)) {
            out.verdict = Verdict::hold;
            out.inferred_from = shorter;
            return out;
        }
    if (no_gain)
        if (auto longer = nearest(Verdict::no_hold, +1)) {
            out.verdict = Verdict::no_hold;
            out.inferred_from = longer;
        }
    return out;
}

std::chrono::seconds verdict_age_limit(const GapEvidence& evidence, std::chrono::seconds max_age) {
    const auto life = max_age * (1 << std::clamp(evidence.confirmations, 0, max_confirmations));
    return evidence.verdict == Verdict::no_hold ? life / no_hold_life_divisor : life;
}

namespace {

// The verdict a class stands by: its own, or while it is measured again, the
// one that expired.
std::optional<Verdict> standing(const GapEvidence& e) {
    if (e.verdict != Verdict::uncertain)
        return e.verdict;
    return e.expired;
}

// The class a carried-over verdict came from, while it still stands by that
// verdict; null otherwise (the class measured again to the other verdict, or
// gone from a file edited by hand).
const GapEvidence* carried_source(const EvidenceBook& book, const GapEvidence& e) {
    if (!e.inferred_from)
        return nullptr;
    const auto it = book.gaps.find(*e.inferred_from);
    if (it == book.gaps.end() || standing(it->second) != e.verdict)
        return nullptr;
    return &it->second;
}

// The reason the verdict at `cls` was carried over is gone: its source, or
// a class between the two (judge_at carries only from the nearest decided
// class), has since decided the other way.
bool carry_broken(const EvidenceBook& book, int cls, const GapEvidence& e) {
    if (!e.inferred_from)
        return false;
    const int from = *e.inferred_from;
    for (int c = std::min(from, cls); c <= std::max(from, cls); ++c) {
        const auto it = book.gaps.find(c);
        if (c != cls && it != book.gaps.end() && it->second.verdict != Verdict::uncertain &&
            it->second.verdict != e.verdict)
            return true;
    }
    return false;
}

} // namespace

std::chrono::seconds verdict_age_limit(const EvidenceBook& book, int cls,
                                       std::chrono::seconds max_age) {
    const auto it = book.gaps.find(cls);
    if (it == book.gaps.end())
        return max_age;
    const GapEvidence& e = it->second;
    if (!e.inferred_from)
        return verdict_age_limit(e, max_age);
    // A source that is itself carried over (also one measured again after
    // such a verdict expired: it keeps inferred_from) has confirmed nothing
    // of its own either: a first life, as verdict_age_limit gives it.
    const GapEvidence* source = carried_source(book, e);
    if (!source || source->inferred_from) {
        GapEvidence unconfirmed;
        unconfirmed.verdict = e.verdict;
        return verdict_age_limit(unconfirmed, max_age);
    }
    // Waiting while the source is measured again (verdict_waits_for): at
    // most the longest life of its own kind.
    if (source->verdict == Verdict::uncertain) {
        GapEvidence longest;
        longest.verdict = e.verdict;
        longest.confirmations = max_confirmations;
        return verdict_age_limit(longest, max_age);
    }
    return verdict_age_limit(*source, max_age);
}

std::optional<int> verdict_waits_for(const EvidenceBook& book, int cls) {
    const auto it = book.gaps.find(cls);
    if (it == book.gaps.end() || it->second.verdict == Verdict::uncertain)
        return std::nullopt;
    // While the source is measured again, the verdict waits for what that
    // finds. Otherwise it would expire after the source's last life and,
    // measured again while the source is undecided, could not be carried
    // over: in the bench run at f4efc2b (cpuidle driver haltpoll,
    // bench/results/HISTORY.md) workload 2's class expired a minute after
    // back-to-back IO did, 5 s before back-to-back IO was confirmed.
    const GapEvidence* source = carried_source(book, it->second);
    if (!source || source->inferred_from || source->verdict != Verdict::uncertain)
        return std::nullopt;
    return it->second.inferred_from;
}

bool refresh_verdicts(EvidenceBook& book, std::int64_t now_s, std::chrono::seconds max_age) {
    bool changed = false;
    // New verdicts first: a carried-over verdict's age limit reads its
    // source's count, which stamping a confirmed source raises.
    for (auto& [cls, e] : book.gaps) {
        if (e.verdict == Verdict::uncertain || e.learnt_at != 0)
            continue;
        e.learnt_at = now_s;
        // Only the class's own pairs confirm: a verdict carried over from
        // another class (judge_at) says nothing of its own (it lasts as long
        // as that class's: verdict_age_limit).
        if (e.expired)
            e.confirmations = e.verdict == *e.expired && !e.inferred_from
                                  ? std::min(e.confirmations + 1, max_confirmations)
                                  : 0;
        else if (e.inferred_from)
            e.confirmations = 0;
        e.expired.reset();
        changed = true;
    }
    for (auto& [cls, e] : book.gaps) {
        if (e.verdict == Verdict::uncertain)
            continue;
        if (e.learnt_at > now_s ||
            now_s - e.learnt_at > verdict_age_limit(book, cls, max_age).count() ||
            carry_broken(book, cls, e)) {
            // A stamp in the future (the clock stepped back, a wrong RTC
            // when it was taken) gives no age: measured again too.
            GapEvidence again;
            again.device = e.device;               // where it is measured again, until a pair says
            again.inferred_from = e.inferred_from; // and what the verdict rested on
            again.confirmations = e.confirmations;
            again.expired = e.verdict;
            e = std::move(again);
            changed = true;
        }
    }
    return changed;
}

// --- The evidence file ------------------------------------------------------

namespace {

constexpr std::string_view evidence_header =
    "# latgov: what holding CPUs awake bought at each idle gap on this machine and kernel,\n"
    "# learnt by latgovd from live IO (windows with and without the hold). Delete the file\n"
    "# to learn again.\n";

// Values may hold spaces (a CPU model): "key = rest of line".
std::string escape(std::string_view text) {
    std::string out;
    for (char c : text)
        out += (c == '\n' || c == '\r') ? ' ' : c;
    return out;
}

} // namespace

std::string format_evidence(const EvidenceBook& book) {
    std::string out(evidence_header);
    out += "cpu_model = " + escape(book.machine.cpu_model) + "\n";
    out += "kernel = " + escape(book.machine.kernel) + "\n";
    out += "cpuidle_driver = " + escape(book.machine.cpuidle_driver) + "\n";
    out += "cpuidle_governor = " + escape(book.machine.cpuidle_governor) + "\n";
    for (const auto& [cls, e] : book.gaps) {
        out += fmt::format(
            "# gap {}: {}, {} pairs ({} gained, {} lost), wait gain {:+.1f}% +- {:.1f}, service "
            "gain {:+.1f}% +- {:.1f}\n",
            gap_class_label(cls), to_string(e.verdict), e.gains.pairs, e.gains.wait_above,
            e.gains.wait_below, 100 * e.gains.wait_mean(),
            e.gains.pairs > 1 ? 100 * e.gains.wait_se() : 0.0, 100 * e.gains.service_mean(),
            e.gains.service_pairs > 1 ? 100 * e.gains.service_se() : 0.0);
        if (e.inferred_from)
            out += fmt::format("# carried over from gap {}\n", gap_class_label(*e.inferred_from));
        if (e.expired)
            out += fmt::format("# measured again (it was {}; confirmed {} times before)\n",
                               to_string(*e.expired), e.confirmations);
        else if (e.confirmations > 0)
            out += fmt::format("# confirmed {} times in a row\n", e.confirmations);
        out += fmt::format("gap class={} verdict={} pairs={} wait_sum={:.9g} wait_sq={:.9g} "
                           "wait_above={} wait_below={} service_pairs={} service_sum={:.9g} "
                           "service_sq={:.9g} device={} learnt_at={}{}{}{}\n",
                           cls, to_string(e.verdict), e.gains.pairs, e.gains.wait_sum,
                           e.gains.wait_sq, e.gains.wait_above, e.gains.wait_below,
                           e.gains.service_pairs, e.gains.service_sum, e.gains.service_sq,
                           e.device.empty() ? "-" : e.device, e.learnt_at,
                           e.inferred_from ? fmt::format(" from={}", *e.inferred_from) : "",
                           e.confirmations > 0 ? fmt::format(" confirmed={}", e.confirmations) : "",
                           e.expired ? fmt::format(" expired={}", to_string(*e.expired)) : "");
    }
    return out;
}

namespace {

// The inverse of to_string(Verdict).
std::optional<Verdict> parse_verdict(std::string_view text) {
    for (const Verdict v : {Verdict::hold, Verdict::no_hold, Verdict::uncertain})
        if (to_string(v) == text)
            return v;
    return std::nullopt;
}

// One "gap key=value ..." line (after "gap "): its class and evidence.
// `where` names the line in errors.
Result<std::pair<int, GapEvidence>> parse_gap_line(std::string_view words_text,
                                                   const std::string& where) {
    std::map<std::string, std::string, std::less<>> fields;
    std::istringstream words{std::string(words_text)};
    std::string word;
    while (words >> word) {
        auto eq = word.find('=');
        if (eq == std::string::npos)
            return make_error(where + ": expected key=value, got \"" + word + "\"");
        fields[word.substr(0, eq)] = word.substr(eq + 1);
    }
    const auto field = [&](std::string_view key) -> Result<std::string> {
        auto it = fields.find(key);
        if (it == fields.end())
            return make_error(where + ": gap line without " + std::string(key));
        return it->second;
    };
    const auto bad = [&](std::string_view key, const std::string& value) {
        return make_error(where + ": bad " + std::string(key) + " \"" + value + "\"");
    };
    GapEvidence e;
    int cls = 0;
    const std::pair<std::string_view, int*> ints[] = {
        {"class", &cls}, {"pairs", &e.gains.pairs}, {"service_pairs", &e.gains.service_pairs}};
    const std::pair<std::string_view, double*> doubles[] = {{"wait_sum", &e.gains.wait_sum},
                                                            {"wait_sq", &e.gains.wait_sq},
                                                            {"service_sum", &e.gains.service_sum},
                                                            {"service_sq", &e.gains.service_sq}};
    for (const auto& [key, target] : ints) {
        auto v = field(key);
        if (!v)
            return v.error();
        if (!parse_whole(*v, *target) || *target < 0)
            return bad(key, *v);
    }
    for (const auto& [key, target] : doubles) {
        auto v = field(key);
        if (!v)
            return v.error();
        if (!parse_whole(*v, *target))
            return bad(key, *v);
    }
    // The signs' counts came later (judge's sign test): a line without them
    // has none.
    for (const auto& [key, target] : {std::pair{"wait_above", &e.gains.wait_above},
                                      std::pair{"wait_below", &e.gains.wait_below}})
        if (auto it = fields.find(key);
            it != fields.end() && (!parse_whole(it->second, *target) || *target < 0))
            return bad(key, it->second);
    if (std::int64_t{e.gains.wait_above} + e.gains.wait_below > e.gains.pairs)
        return make_error(where + ": wait_above and wait_below (" +
                          std::to_string(e.gains.wait_above) + " and " +
                          std::to_string(e.gains.wait_below) + ") count more pairs than pairs (" +
                          std::to_string(e.gains.pairs) + ")");
    if (cls >= gap_classes)
        return make_error(where + ": gap class " + std::to_string(cls) + " out of range (0.." +
                          std::to_string(gap_classes - 1) + ")");
    auto verdict_text = field("verdict");
    if (!verdict_text)
        return verdict_text.error();
    auto verdict = parse_verdict(*verdict_text);
    if (!verdict)
        return make_error(where + ": bad verdict \"" + *verdict_text +
                          "\" (hold, no-hold or uncertain)");
    e.verdict = *verdict;
    auto device = field("device");
    e.device = device && *device != "-" ? *device : std::string{};
    if (auto at = fields.find("learnt_at");
        at != fields.end() && (!parse_whole(at->second, e.learnt_at) || e.learnt_at < 0))
        return bad("learnt_at", at->second);
    if (auto confirmed = fields.find("confirmed");
        confirmed != fields.end() && (!parse_whole(confirmed->second, e.confirmations) ||
                                      e.confirmations < 0 || e.confirmations > max_confirmations))
        return make_error(where + ": bad confirmed \"" + confirmed->second + "\" (0.." +
                          std::to_string(max_confirmations) + ")");
    if (auto expired = fields.find("expired"); expired != fields.end()) {
        e.expired = parse_verdict(expired->second);
        if (!e.expired || *e.expired == Verdict::uncertain)
            return make_error(where + ": bad expired \"" + expired->second +
                              "\" (hold or no-hold)");
    }
    if (auto from = fields.find("from"); from != fields.end()) {
        int c = -1;
        if (!parse_whole(from->second, c) || c < 0 || c >= gap_classes || c == cls)
            return make_error(where + ": bad from \"" + from->second +
                              "\" (another gap class, 0.." + std::to_string(gap_classes - 1) + ")");
        e.inferred_from = c;
    }
    return std::pair{cls, std::move(e)};
}

// One "key = value" line of the machine the evidence was learnt on.
Result<void> parse_machine_line(std::string_view line, MachineIdentity& machine,
                                const std::string& where) {
    const size_t eq = line.find(" =");
    if (eq == std::string_view::npos)
        return make_error(where + ": expected \"key = value\" or a gap line");
    const std::string_view key = line.substr(0, eq);
    std::string_view rest = line.substr(eq + 2);
    if (rest.starts_with(' '))
        rest.remove_prefix(1);
    std::string* field = key == "cpu_model"          ? &machine.cpu_model
                         : key == "kernel"           ? &machine.kernel
                         : key == "cpuidle_driver"   ? &machine.cpuidle_driver
                         : key == "cpuidle_governor" ? &machine.cpuidle_governor
                                                     : nullptr;
    if (!field)
        return make_error(where + ": unknown key \"" + std::string(key) + "\"");
    *field = std::string(rest);
    return {};
}

} // namespace

Result<EvidenceBook> parse_evidence(std::string_view text, const std::string& source_name) {
    EvidenceBook book;
    int line_no = 0;
    size_t pos = 0;
    while (pos <= text.size()) {
        size_t end = text.find('\n', pos);
        if (end == std::string_view::npos)
            end = text.size();
        std::string_view line = text.substr(pos, end - pos);
        pos = end + 1;
        ++line_no;
        while (!line.empty() && (line.back() == ' ' || line.back() == '\r'))
            line.remove_suffix(1);
        if (line.empty() || line.front() == '#')
            continue;
        const std::string where = source_name + ":" + std::to_string(line_no);
        if (line.starts_with("gap ")) {
            auto gap = parse_gap_line(line.substr(4), where);
            if (!gap)
                return gap.error();
            book.gaps[gap->first] = std::move(gap->second);
        } else if (auto parsed = parse_machine_line(line, book.machine, where); !parsed) {
            return parsed.error();
        }
    }
    return book;
}

// --- One device's decision --------------------------------------------------

bool HoldEvidence::observe(std::uint64_t ios, double busy_ms, TimePoint::duration dt,
                           EvidenceBook& book, const std::string& device,
                           const EvidenceRules& rules, bool experiment) {
    // A counter that went backwards (a device reset) or wrapped says nothing.
    if (!(busy_ms >= 0) || busy_ms > 1e7) {
        idle();
        return false;
    }
    // The tick ran under what decide() said at the previous one, and that
    // changes only when a window finishes.
    const bool held = decide(book).hold;
    const double seconds = std::chrono::duration<double>(dt).count();
    if (last_arm_ != held) {
        last_arm_ = held;
        settled_s_ = 0;
        window_ = {};
    }
    settled_s_ += seconds;
    if (settled_s_ * 1000 <= static_cast<double>(rules.settle.count()))
        return false;
    window_.held = held;
    window_.seconds += seconds;
    window_.ios += ios;
    window_.busy_ms += busy_ms;
    const bool long_enough =
        window_.seconds * 1000 >= static_cast<double>(rules.min_window.count()) &&
        window_.ios >= rules.min_ios &&
        (window_.cycle_us() / static_cast<double>(window_.ios) <=
             static_cast<double>(rules.max_cycle_step.count()) ||
         window_.seconds * 1000 >= static_cast<double>(rules.long_window.count()));
    if (long_enough || window_.seconds * 1000 >= static_cast<double>(rules.max_window.count()))
        return finish_window(book, device, rules, experiment);
    return false;
}

bool HoldEvidence::finish_window(EvidenceBook& book, const std::string& device,
                                 const EvidenceRules& rules, bool experiment) {
    const IoWindow done = window_;
    window_ = {};
    ++windows_;
    last_window_ = done;
    if (done.ios < rules.min_ios / 4) {
        first_.reset(); // too few completions to say anything: start the pair again
        return false;
    }
    const std::optional<int> before = tracker_.current();
    const int cls = tracker_.update(done.gap_us());
    if (tracker_.unconfirmed()) {
        // Neither workload's: pair nothing with it, but keep the pair's
        // first window. The next window runs the same arm again and either
        // confirms the new class (which restarts the pair) or falls back
        // into this one and completes the pair. Dropped, the first window
        // would be taken again and again when the hold's own gain moves
        // the gap without the hold past the class's slack: no pair would
        // complete, and the device would go unheld half of the time.
        return false;
    }
    gap_us_ = done.gap_us();
    if (before && *before != cls)
        restart(); // the workload changed: a pair across it compares two workloads
    if (!experiment)
        return false;
    GapEvidence& evidence = book.gaps[cls];
    if (evidence.verdict != Verdict::uncertain) {
        first_.reset();
        return false;
    }
    // The window's arm was the experiment's: pair it with the previous one.
    if (!first_ || first_->held == done.held) {
        first_ = done;
        resume_unheld_ = false;
        return false;
    }
    const IoWindow first = *first_;
    first_.reset();
    const IoWindow& on = done.held ? done : first;
    const IoWindow& off = done.held ? first : done;
    if (!evidence.gains.add(on, off))
        return false;
    ++(first.held ? on_first_ : off_first_);
    GapEvidence judged = judge_at(book, cls, evidence.gains, rules);
    evidence.verdict = judged.verdict;
    evidence.inferred_from = judged.inferred_from;
    evidence.device = device;
    return evidence.verdict != Verdict::uncertain;
}

void HoldEvidence::idle() {
    // The pair's first window stays: bursts of IO that each fit one window
    // (0.5 to 1 s of IO between idle gaps) would otherwise never complete
    // a pair, and their experiment would run for as long as they come, half
    // of them without the hold. Pairing across the gap is unbiased: the
    // ABBA order puts the held window before the gap in one pair and the
    // unheld one in the next, so a difference between the IO before a gap
    // and after it cancels as a drift does; a window is never measured
    // across the gap itself (the one in progress is dropped, and the next
    // settles first); and a workload that changed over the gap moves the
    // gap class, which drops the pair (finish_window).
    window_ = {};
    last_arm_.reset();
}

void HoldEvidence::interrupted() {
    // Unlike an idle gap, this falls on the arm without the hold only: a
    // pair across it would pair a held window measured while another
    // device was active with an unheld one measured once it was not, every
    // time in that order. So the pair's held window is dropped. The next
    // pair starts without the hold, not held again: held, the device would
    // hold for itself and so defer another learning device that waits for
    // its own arm without the hold (Governor::defer_unheld_arms), and two
    // such devices would interrupt each other's pairs for good; in the arm
    // without the hold, it waits (held by the governor meanwhile) until
    // nothing holds its CPUs. The pair order stays balanced all the same:
    // each pair starts with the arm fewer completed pairs started with
    // (decide()).
    window_ = {};
    last_arm_.reset();
    if (first_) {
        first_.reset();
        resume_unheld_ = true;
    }
}

void HoldEvidence::restart() {
    first_.reset();
    on_first_ = off_first_ = 0;
    resume_unheld_ = false;
}

void HoldEvidence::span_gap(double gap_us) {
    if (!(gap_us >= 0) || !std::isfinite(gap_us))
        return;
    const std::optional<int> before = tracker_.current();
    const int cls = tracker_.update(gap_us);
    if (tracker_.unconfirmed())
        return;
    gap_us_ = gap_us;
    if (before && *before != cls)
        restart(); // another workload: its experiment starts afresh
}

HoldDecision HoldEvidence::decide(const EvidenceBook& book) const {
    HoldDecision d;
    d.gap_class = tracker_.current();
    if (d.gap_class) {
        const auto known = [&](int cls) -> const GapEvidence* {
            auto it = book.gaps.find(cls);
            return it != book.gaps.end() && it->second.verdict != Verdict::uncertain ? &it->second
                                                                                     : nullptr;
        };
        int by = *d.gap_class;
        const GapEvidence* e = known(by);
        // A gap near a class boundary also takes the verdict across it.
        if (!e && gap_us_ && *gap_us_ < gap_class_low_us(*d.gap_class) * gap_class_slack)
            e = known(by = *d.gap_class - 1);
        if (!e && gap_us_ && *gap_us_ * gap_class_slack > gap_class_high_us(*d.gap_class))
            e = known(by = *d.gap_class + 1);
        if (e) {
            d.hold = e->verdict == Verdict::hold;
            d.decided_by = by;
            d.evidence = *e;
            return d;
        }
    }
    d.experimenting = true;
    // A pair in progress finishes with the other arm. A new one starts with
    // the arm fewer completed pairs started with, held at a tie: on, off,
    // off, on, on, off, ... (ABBA order, so a drift in the workload
    // cancels); without the hold after an interrupted pair (interrupted()).
    d.hold = first_ ? !first_->held : !resume_unheld_ && on_first_ <= off_first_;
    return d;
}

std::chrono::milliseconds choose_linger(std::optional<std::chrono::milliseconds> fixed,
                                        std::optional<double> gap_us) {
    using std::chrono::milliseconds;
    if (fixed)
        return *fixed;
    if (!gap_us || !(*gap_us < std::chrono::duration<double, std::micro>(stream_gap).count()))
        return auto_linger_floor;
    const auto twice = milliseconds(static_cast<long>(std::ceil(2.0 * *gap_us / 1000.0)));
    return std::max(auto_linger_floor, twice);
}

} // namespace latgov
