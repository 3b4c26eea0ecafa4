// The live-IO cost model on plain structs: a simulated closed-loop workload
// (think, device, completion wake-up, waiter wake-up) fed tick by tick.
#include "latgov/cost_model.hpp"
#include "latgov/governor.hpp"
#include "machines.hpp"

#include <cmath>
#include <doctest/doctest.h>
#include <random>

using namespace latgov;
using namespace std::chrono_literals;

namespace {

const TimePoint t0{};

// One request at a time: the task thinks, submits, the device serves, the
// completion CPU wakes for the interrupt, the waiting task's CPU wakes.
// The wake-ups cost only when not held.
struct Workload {
    double think_us = 1000;
    double device_us = 40;
    double completion_wake_us = 10; // counted in the kernel's request time
    double waiter_wake_us = 40;     // after the request ends: in the cycle only
    double noise = 0.0;             // relative, per tick, on the request rate

    double service_us(bool held) const { return device_us + (held ? 0 : completion_wake_us); }
    double cycle_us(bool held) const {
        return think_us + service_us(held) + (held ? 0 : waiter_wake_us);
    }
};

// Drives one HoldEvidence through ticks of `tick`, as the governor would.
struct Simulation {
    HoldEvidence evidence;
    EvidenceBook book;
    std::mt19937 rng{42};
    double carry_ios = 0;
    double carry_busy_ms = 0;
    int ticks = 0;
    int held_ticks = 0;

    // Runs `limit` ticks, or until the decision settles when `settle`;
    // returns the ticks run.
    int run(const Workload& w, int limit, bool settle = true,
            std::chrono::milliseconds tick = 20ms) {
        std::normal_distribution<double> normal(0.0, 1.0);
        for (int i = 0; i < limit; ++i) {
            const bool held = evidence.decide(book).hold;
            held_ticks += held;
            const double factor = std::max(0.1, 1.0 + w.noise * normal(rng));
            const double ios_f =
                static_cast<double>(tick.count()) * 1000.0 / w.cycle_us(held) * factor + carry_ios;
            const auto ios = static_cast<std::uint64_t>(ios_f);
            carry_ios = ios_f - static_cast<double>(ios);
            const double busy_f =
                static_cast<double>(ios) * w.service_us(held) / 1000.0 + carry_busy_ms;
            const double busy = std::floor(busy_f); // whole ms, like the stat file
            carry_busy_ms = busy_f - busy;
            evidence.observe(ios, busy, tick, book, "vda");
            ++ticks;
            if (settle && !evidence.decide(book).experimenting && i > 0)
                return i + 1;
        }
        return limit;
    }
};

// An evidence file's gap line for class `cls` with nothing learnt, then `tail`.
std::string gap_line(int cls, std::string_view tail) {
    return "gap class=" + std::to_string(cls) +
           " verdict=hold pairs=1 wait_sum=0 wait_sq=0 service_pairs=0 service_sum=0 "
           "service_sq=0" +
           std::string(tail) + "\n";
}

Verdict verdict_at(const EvidenceBook& book, double gap_us) {
    auto it = book.gaps.find(gap_class(gap_us));
    return it == book.gaps.end() ? Verdict::uncertain : it->second.verdict;
}

} // namespace

TEST_CASE("gap classes: back to back, then doubling from 128 us") {
    CHECK(gap_class(0) == 0);
    CHECK(gap_class(60) == 0);
    CHECK(gap_class(127.9) == 0);
    CHECK(gap_class(128) == 1);
    CHECK(gap_class(1000) == 3);
    CHECK(gap_class(1100) == 4);
    CHECK(gap_class(5000) == 6);
    CHECK(gap_class(1e9) == gap_classes - 1);
    CHECK(gap_class(std::nan("")) == 0);
    CHECK(gap_class_label(0) == "< 128 us");
    CHECK(gap_class_label(4) == "1024-2048 us");
    CHECK(gap_class_label(gap_classes - 1) == ">= 16384 us");
}

TEST_CASE("the gap class moves only when two gaps in a row leave it by more than 25%") {
    GapClassTracker t;
    CHECK(t.update(1100) == 4);
    CHECK_FALSE(t.unconfirmed());
    CHECK(t.update(1000) == 4); // just below 1024, as holding shortens the gap
    CHECK(t.update(2400) == 4); // within 25% above 2048
    CHECK_FALSE(t.unconfirmed());
    CHECK(t.update(2600) == 4); // far above: one window is not yet a new workload
    CHECK(t.unconfirmed());
    CHECK(t.update(5000) == 6); // a second one far above: the class of the latest
    CHECK_FALSE(t.unconfirmed());
    CHECK(t.update(900) == 6);
    CHECK(t.update(900) == 3);
    // A blip, then the old gap: no move, and the blip is forgotten.
    CHECK(t.update(200) == 3);
    CHECK(t.unconfirmed());
    CHECK(t.update(1000) == 3);
    CHECK_FALSE(t.unconfirmed());
    CHECK(t.update(200) == 3);
    // Far below, then far above: two blips on opposite sides confirm neither.
    CHECK(t.update(3000) == 3);
    CHECK(t.unconfirmed());
}

TEST_CASE("judge: a clear gain holds, no gain or a loss holds nothing, noise waits") {
    EvidenceRules rules;
    const auto window = [](bool held, double cycle_us, double service_us) {
        IoWindow w{held, 0.1, 100, 0};
        w.seconds = cycle_us * 100 / 1e6;
        w.busy_ms = service_us * 100 / 1e3;
        return w;
    };
    Gains gain;
    for (int i = 0; i < 3; ++i)
        gain.add(window(true, 1000, 40), window(false, 1100 + i, 50));
    CHECK(judge(gain, rules) == Verdict::uncertain); // too few pairs, however clear
    gain.add(window(true, 1000, 40), window(false, 1102, 50));
    CHECK(judge(gain, rules) == Verdict::hold);

    Gains none;
    for (int i = 0; i < 4; ++i)
        none.add(window(true, 1000 + (i % 2 ? 3 : -3), 40), window(false, 1000, 40));
    CHECK(judge(none, rules) == Verdict::no_hold);

    Gains worse;
    for (int i = 0; i < 4; ++i)
        worse.add(window(true, 1100 + i, 50), window(false, 1000, 40));
    CHECK(judge(worse, rules) == Verdict::no_hold);

    // Noisy and small: undecided until max_pairs, then the point estimate.
    Gains noisy;
    for (int i = 0; i < rules.max_pairs - 1; ++i)
        noisy.add(window(true, i % 2 ? 1200 : 880, 40), window(false, 1000, 40));
    CHECK(judge(noisy, rules) == Verdict::uncertain);
    noisy.add(window(true, 880, 40), window(false, 1000, 40));
    CHECK(judge(noisy, rules) != Verdict::uncertain);
}

TEST_CASE("student_t_quantile: Student's t at the confidence of z, from 3 degrees of freedom") {
    // Exact quantiles at one-sided p = Phi(-2.5) = 0.00621, by numerical
    // integration of the t density.
    CHECK(student_t_quantile(2.5, 3) == doctest::Approx(5.405).epsilon(0.01));
    CHECK(student_t_quantile(2.5, 4) == doctest::Approx(4.323).epsilon(0.002));
    CHECK(student_t_quantile(2.5, 7) == doctest::Approx(3.340).epsilon(0.001));
    CHECK(student_t_quantile(2.5, 15) == doctest::Approx(2.840).epsilon(0.001));
    CHECK(student_t_quantile(1.96, 3) == doctest::Approx(3.182).epsilon(0.002)); // t(0.975, 3)
    CHECK(student_t_quantile(2.5, 1000) == doctest::Approx(2.5).epsilon(0.002));
    CHECK(std::isinf(student_t_quantile(2.5, 2)));
}

TEST_CASE("judge: four noisy pairs are not sure, whatever their mean") {
    // Wait gains of -4%, -13%, -6% and -14% (too little busy time for the
    // service gain): 2.5 standard errors (6.2 points) would call it a sure
    // loss; Student's t at 3 degrees of freedom (13.4 points) does not.
    EvidenceRules rules;
    const auto window = [](bool held, double cycle_us) {
        IoWindow w{held, cycle_us * 100 / 1e6, 100, 0};
        w.busy_ms = 100 * 100 / 1e3;
        return w;
    };
    Gains noisy;
    for (double loss : {0.04, 0.13, 0.06, 0.14})
        noisy.add(window(true, 1000 + loss * 100), window(false, 1000));
    REQUIRE(noisy.pairs == 4);
    REQUIRE(noisy.wait_mean() == doctest::Approx(-0.0925));
    REQUIRE(noisy.wait_mean() + rules.z * noisy.wait_se() < 0);
    CHECK(judge(noisy, rules) == Verdict::uncertain);
    // The same spread over 8 pairs is a sure loss.
    for (double loss : {0.04, 0.13, 0.06, 0.14})
        noisy.add(window(true, 1000 + loss * 100), window(false, 1000));
    CHECK(judge(noisy, rules) == Verdict::no_hold);
}

TEST_CASE("judge_at: an undecided class takes a shorter gap's hold or a longer gap's no-hold") {
    EvidenceRules rules;
    // Pairs with the given mean relative gains (cycle, service) and a spread
    // too wide for judge() to decide: +-12% around the mean.
    const auto gains = [&](int pairs, double cycle, double service) {
        Gains g;
        for (int i = 0; i < pairs; ++i) {
            const double d = (i % 2 ? 0.12 : -0.12);
            g.pairs++;
            g.wait_sum += cycle + d;
            g.wait_sq += (cycle + d) * (cycle + d);
            g.service_pairs++;
            g.service_sum += service + d;
            g.service_sq += (service + d) * (service + d);
        }
        return g;
    };
    const Gains small_gain = gains(rules.min_pairs, 0.01, 0.08);
    REQUIRE(judge(small_gain, rules) == Verdict::uncertain);

    EvidenceBook book;
    // Nothing decided anywhere: the class's own pairs alone.
    CHECK(judge_at(book, 4, small_gain, rules).verdict == Verdict::uncertain);

    // Back-to-back IO held: a longer gap with no loss in its own pairs holds.
    book.gaps[0].verdict = Verdict::hold;
    GapEvidence carried = judge_at(book, 4, small_gain, rules);
    CHECK(carried.verdict == Verdict::hold);
    CHECK(carried.inferred_from == 0);
    CHECK(carried.gains.pairs == rules.min_pairs);
    // A nearer shorter class that holds nothing stands in between.
    book.gaps[2].verdict = Verdict::no_hold;
    CHECK(judge_at(book, 4, small_gain, rules).verdict == Verdict::uncertain);
    book.gaps.erase(2);
    // Not before min_pairs of its own, and not over a point loss beyond the
    // margin, nor to a shorter gap.
    CHECK(judge_at(book, 4, gains(rules.min_pairs - 1, 0.01, 0.08), rules).verdict ==
          Verdict::uncertain);
    CHECK(judge_at(book, 4, gains(rules.min_pairs, 0.01, -0.05), rules).verdict ==
          Verdict::uncertain);
    book.gaps.clear();
    book.gaps[6].verdict = Verdict::hold;
    CHECK(judge_at(book, 4, small_gain, rules).verdict == Verdict::uncertain);

    // A longer gap bought nothing: a shorter one whose own pairs show no gain
    // above the margin holds nothing; one with a point gain above it waits.
    book.gaps[6].verdict = Verdict::no_hold;
    const Gains flat = gains(rules.min_pairs, 0.005, 0.01);
    REQUIRE(judge(flat, rules) == Verdict::uncertain);
    GapEvidence dropped = judge_at(book, 4, flat, rules);
    CHECK(dropped.verdict == Verdict::no_hold);
    CHECK(dropped.inferred_from == 6);
    CHECK(judge_at(book, 4, small_gain, rules).verdict == Verdict::uncertain);
    CHECK(judge_at(book, 8, flat, rules).verdict == Verdict::uncertain);

    // The class's own clear verdict always wins, and is its own.
    book.gaps[0].verdict = Verdict::hold;
    const Gains worse = gains(2 * rules.min_pairs, -0.3, -0.3);
    GapEvidence own = judge_at(book, 4, worse, rules);
    CHECK(own.verdict == Verdict::no_hold);
    CHECK_FALSE(own.inferred_from);
}

TEST_CASE("a noisy gain at a longer gap is decided sooner once a shorter gap holds") {
    Workload w; // 1.5 ms think time, the wake-ups a few % of the cycle, noisy ticks
    w.think_us = 1500;
    w.completion_wake_us = 6;
    w.waiter_wake_us = 20;
    w.noise = 0.08;

    Simulation alone;
    const int alone_ticks = alone.run(w, 4000);

    Simulation helped;
    helped.book.gaps[0].verdict = Verdict::hold; // back-to-back IO decided "hold"
    const int helped_ticks = helped.run(w, 4000);
    MESSAGE("ticks to decide: alone ", alone_ticks, ", with the shorter gap's hold ", helped_ticks);
    const GapEvidence& e = helped.book.gaps.at(gap_class(w.think_us + 40));
    CHECK(e.verdict == Verdict::hold);
    CHECK(e.inferred_from == 0);
    CHECK(e.gains.pairs < EvidenceRules{}.max_pairs);
    CHECK(helped_ticks < alone_ticks);
    // and from then on every tick holds
    const int held_before = helped.held_ticks;
    helped.run(w, 50, false);
    CHECK(helped.held_ticks - held_before == 50);
}

TEST_CASE("where holding buys latency, a few window pairs decide to hold, and it stays held") {
    Simulation sim;
    Workload w; // 1 ms think: waking costs 50 us of an ~1.1 ms cycle, 17% of the request
    const int ticks = sim.run(w, 500);
    CHECK(ticks < 200); // decided within 4 s of IO
    CHECK(verdict_at(sim.book, 1000) == Verdict::hold);
    CHECK(sim.book.gaps.at(gap_class(1000)).gains.pairs >= EvidenceRules{}.min_pairs);
    CHECK(sim.book.gaps.at(gap_class(1000)).device == "vda");
    // Half of the experiment ran held; from now on every tick is.
    const int held_before = sim.held_ticks;
    sim.run(w, 50, false);
    CHECK(sim.held_ticks - held_before == 50);
    CHECK_FALSE(sim.evidence.decide(sim.book).experimenting);
}

TEST_CASE("where holding buys nothing measurable, nothing is held") {
    Simulation sim;
    Workload w;
    w.completion_wake_us = 0;
    w.waiter_wake_us = 0;
    w.noise = 0.01;
    sim.run(w, 500);
    CHECK(verdict_at(sim.book, 1000) == Verdict::no_hold);
    CHECK_FALSE(sim.evidence.decide(sim.book).hold);
}

TEST_CASE("holding that makes latency worse is dropped") {
    Simulation sim;
    Workload w;
    w.completion_wake_us = -15; // e.g. polling steals the cycles of an SMT sibling
    w.waiter_wake_us = -30;
    sim.run(w, 500);
    CHECK(verdict_at(sim.book, 1000) == Verdict::no_hold);
    CHECK_FALSE(sim.evidence.decide(sim.book).hold);
}

TEST_CASE("noisy samples: a real gain is still found, and no gain is not taken for one") {
    Simulation gain;
    Workload w;
    w.think_us = 200;
    w.noise = 0.05; // 5% per 20 ms tick on a ~17% effect
    gain.run(w, 2000);
    CHECK(verdict_at(gain.book, w.think_us + 40) == Verdict::hold);

    Simulation nothing;
    w.completion_wake_us = 0;
    w.waiter_wake_us = 0;
    nothing.run(w, 2000);
    CHECK(verdict_at(nothing.book, w.think_us + 40) == Verdict::no_hold);
}

TEST_CASE("a workload whose gap changes is measured again, and a known gap is decided at once") {
    Simulation sim;
    Workload thinking; // 1 ms gaps: holding pays
    sim.run(thinking, 500);
    REQUIRE(verdict_at(sim.book, 1000) == Verdict::hold);

    // 5 ms gaps where, say, holding costs 10 us per request on the device
    // path and 150 us on the task's own (a host that takes CPU time from a
    // polling vCPU): a loss of 3% of the cycle, which the windows' whole
    // completions can show. A hold that merely bought nothing here would
    // take the 1 ms class's verdict once its own 4 pairs were unsure
    // (judge_at: a wake-up is no cheaper after a longer sleep).
    Workload sleepy = thinking;
    sleepy.think_us = 5000;
    sleepy.completion_wake_us = -10;
    sleepy.waiter_wake_us = -150;
    sim.run(sleepy, 20, false); // one window shows the new gap
    CHECK(sim.evidence.decide(sim.book).hold);
    CHECK_FALSE(sim.evidence.decide(sim.book).experimenting);
    sim.run(sleepy, 20, false); // a second one confirms it
    CHECK(sim.evidence.decide(sim.book).experimenting);
    sim.run(sleepy, 4000);
    CHECK(verdict_at(sim.book, 5000) == Verdict::no_hold);
    CHECK_FALSE(sim.evidence.decide(sim.book).hold);

    // Back to 1 ms gaps: known, so decided within two windows (the first
    // one mixes both workloads) and held from then on, with no experiment.
    sim.run(thinking, 40, false);
    CHECK(sim.evidence.decide(sim.book).hold);
    CHECK_FALSE(sim.evidence.decide(sim.book).experimenting);
    const int held_before = sim.held_ticks;
    sim.run(thinking, 50, false);
    CHECK(sim.held_ticks - held_before == 50);
}

TEST_CASE("one window with an odd gap neither changes the decision nor enters the evidence") {
    Simulation sim;
    Workload thinking; // 1 ms gaps: holding pays
    sim.run(thinking, 500);
    REQUIRE(verdict_at(sim.book, 1000) == Verdict::hold);
    const std::uint64_t windows = sim.evidence.windows();
    // One window's worth of back-to-back IO (a ramp ending, another job's
    // burst), then the 1 ms gaps again: held throughout.
    Workload burst = thinking;
    burst.think_us = 150;
    const int held_before = sim.held_ticks;
    int ran = 0;
    while (sim.evidence.windows() == windows) {
        sim.run(burst, 1, false);
        ++ran;
    }
    CHECK(sim.evidence.last_window().gap_us() < 400);
    CHECK_FALSE(sim.book.gaps.contains(gap_class(sim.evidence.last_window().gap_us())));
    sim.run(thinking, 50, false);
    CHECK(sim.held_ticks - held_before == ran + 50);
    CHECK(sim.evidence.gap_us() > 900);
}

TEST_CASE("an idle device drops the window in progress") {
    Simulation sim;
    Workload w;
    sim.run(w, 3);
    sim.evidence.idle();
    // A fresh start: the experiment begins again with the hold on.
    CHECK(sim.evidence.decide(sim.book).hold);
}

TEST_CASE("the evidence file: format, parse back, and errors with file:line") {
    EvidenceBook book;
    book.machine = {"AMD EPYC 7B13 64-Core", "6.18.0-1-amd64", "haltpoll", "haltpoll"};
    GapEvidence e;
    e.gains.pairs = 4;
    e.gains.wait_sum = 1.2;
    e.gains.wait_sq = 0.37;
    e.gains.service_pairs = 4;
    e.gains.service_sum = 0.8;
    e.gains.service_sq = 0.17;
    e.verdict = Verdict::hold;
    e.device = "vda";
    book.gaps[4] = e;
    book.gaps[6].verdict = Verdict::no_hold;
    const std::string text = format_evidence(book);
    auto parsed = parse_evidence(text, "evidence");
    REQUIRE(parsed);
    CHECK(parsed->machine == book.machine);
    REQUIRE(parsed->gaps.size() == 2);
    CHECK(parsed->gaps.at(4).verdict == Verdict::hold);
    CHECK(parsed->gaps.at(4).gains.pairs == 4);
    CHECK(parsed->gaps.at(4).gains.wait_sum == doctest::Approx(1.2));
    CHECK(parsed->gaps.at(4).device == "vda");
    CHECK(parsed->gaps.at(6).verdict == Verdict::no_hold);
    CHECK(parsed->gaps.at(6).device.empty());
    CHECK_FALSE(parsed->gaps.at(4).inferred_from);

    // A verdict carried over from another class says which, and reads back.
    book.gaps[5].verdict = Verdict::hold;
    book.gaps[5].inferred_from = 4;
    const std::string carried = format_evidence(book);
    CHECK(carried.find("# carried over from gap 1024-2048 us\n") != std::string::npos);
    auto reread = parse_evidence(carried, "evidence");
    REQUIRE(reread);
    CHECK(reread->gaps.at(5).inferred_from == 4);
    auto self = parse_evidence(gap_line(5, " from=5"), "e");
    REQUIRE_FALSE(self);
    CHECK(self.error().message == "e:1: bad from \"5\" (another gap class, 0..8)");

    auto bad = parse_evidence("kernel = 6.18\ngap class=4 verdict=maybe pairs=1 wait_sum=0 "
                              "wait_sq=0 service_pairs=0 service_sum=0 service_sq=0\n",
                              "/var/lib/latgov/evidence");
    REQUIRE_FALSE(bad);
    CHECK(bad.error().message ==
          "/var/lib/latgov/evidence:2: bad verdict \"maybe\" (hold, no-hold or uncertain)");
    auto missing = parse_evidence("gap class=4 verdict=hold\n", "e");
    REQUIRE_FALSE(missing);
    CHECK(missing.error().message == "e:1: gap line without pairs");
    auto range = parse_evidence(gap_line(99, ""), "e");
    REQUIRE_FALSE(range);
    CHECK(range.error().message == "e:1: gap class 99 out of range (0..8)");
    CHECK_FALSE(parse_evidence("colour = blue\n", "e"));
}

TEST_CASE("linger: fixed when set, else through the gaps of a stream, 3 ms after longer ones") {
    CHECK(choose_linger(7ms, 1000.0) == 7ms);
    CHECK(choose_linger(std::nullopt, std::nullopt) == 3ms);
    CHECK(choose_linger(std::nullopt, 200.0) == 3ms);
    CHECK(choose_linger(std::nullopt, 4000.0) == 8ms);
    CHECK(choose_linger(std::nullopt, 9000.0) == 18ms);
    CHECK(choose_linger(std::nullopt, 30000.0) == 3ms); // idle between bursts
}

namespace {

Topology haltpoll_machine(std::string driver = "haltpoll") {
    return virtio_machine(driver, driver == "none" ? "" : "haltpoll");
}

// A closed loop of 4k reads at `cycle_us` per request (hold or not), 20 ms ticks.
struct Stream {
    std::uint64_t ios = 0;
    double busy_ms = 0;
    double carry = 0;
    IoSample next(double cycle_us, double service_us) {
        carry += 20000.0 / cycle_us;
        const auto n = static_cast<std::uint64_t>(carry);
        carry -= static_cast<double>(n);
        ios += n;
        busy_ms += static_cast<double>(n) * service_us / 1000.0;
        const auto ticks_ms = static_cast<std::uint64_t>(busy_ms);
        IoSample s;
        s.irq_counts.assign(37, 0);
        s.irq_counts[36] = ios;
        BlockStat stat;
        stat.read_ios = ios;
        stat.read_ticks_ms = ticks_ms;
        s.devices = {stat};
        return s;
    }
};

} // namespace

TEST_CASE("under haltpoll, auto mode never uses the declared 1 us: live IO decides to hold 0") {
    const Topology t = haltpoll_machine();
    Governor g(t, default_config(), declared_costs(t));
    Stream io;
    g.observe(io.next(1e9, 40), t0);
    INFO(g.limit_reason(g.devices()[0]));
    bool saw_off = false;
    bool learnt = false;
    TimePoint now = t0;
    for (int i = 1; i < 200 && !learnt; ++i) {
        now += 20ms;
        const bool held = g.holds().percpu.count(1) == 1;
        saw_off |= i > 2 && !held;
        g.observe(io.next(held ? 1090 : 1150, held ? 40 : 50), now);
        learnt = g.take_evidence_changed();
    }
    REQUIRE(learnt);
    CHECK(saw_off); // it did measure without the hold
    CHECK(g.evidence().gaps.at(gap_class(1050)).verdict == Verdict::hold);
    now += 20ms;
    g.observe(io.next(1090, 40), now);
    CHECK(g.holds().percpu.at(1).limit == LatencyLimit{0});
    CHECK(g.limit_reason(g.devices()[0]).find("holding buys latency") != std::string::npos);

    // The next start on the same machine reuses it: no window without the hold.
    Governor again(t, default_config(), declared_costs(t), g.evidence());
    Stream io2;
    again.observe(io2.next(1e9, 40), t0);
    for (int i = 1; i < 30; ++i) {
        again.observe(io2.next(1090, 40), t0 + i * 20ms);
        CHECK(again.holds().percpu.count(1) == 1);
    }
    CHECK_FALSE(again.take_evidence_changed());
}

TEST_CASE("with no cpuidle driver auto mode holds nothing and says why") {
    const Topology t = haltpoll_machine("none");
    Governor g(t, default_config(), declared_costs(t));
    Stream io;
    g.observe(io.next(1e9, 40), t0);
    for (int i = 1; i < 20; ++i) {
        g.observe(io.next(60, 40), t0 + i * 20ms);
        CHECK(g.holds().percpu.empty());
    }
    CHECK(g.any_active());
    CHECK(g.limit_reason(g.devices()[0]).starts_with("no cpuidle driver"));
}

TEST_CASE("new verdicts are stamped, a no-hold verdict is measured again after max_age") {
    EvidenceBook book;
    book.gaps[0].verdict = Verdict::no_hold;
    book.gaps[0].gains.pairs = 6;
    book.gaps[3].verdict = Verdict::hold;
    book.gaps[5].gains.pairs = 2; // uncertain: nothing to stamp
    CHECK(refresh_verdicts(book, 1000, 600s));
    CHECK(book.gaps.at(0).learnt_at == 1000);
    CHECK(book.gaps.at(3).learnt_at == 1000);
    CHECK(book.gaps.at(5).learnt_at == 0);
    CHECK_FALSE(refresh_verdicts(book, 1600, 600s));
    CHECK(refresh_verdicts(book, 1601, 600s));
    CHECK(book.gaps.at(0).verdict == Verdict::uncertain);
    CHECK(book.gaps.at(0).gains.pairs == 0);
    CHECK(book.gaps.at(3).verdict == Verdict::hold); // holding is kept

    auto parsed = parse_evidence(format_evidence(book), "e");
    REQUIRE(parsed);
    CHECK(parsed->gaps.at(3).learnt_at == 1000);
    auto bad = parse_evidence(gap_line(1, " learnt_at=-5"), "e");
    REQUIRE_FALSE(bad);
    CHECK(bad.error().message == "e:1: bad learnt_at \"-5\"");
}
