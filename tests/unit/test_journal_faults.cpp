// Kills at every step of every change a PerCpuHolder makes, on a temp tree
// where pm_qos_resume_latency_us files are plain files: a restore afterwards
// always brings back the original, keeps values others set, and keeps the
// entries it cannot put back.
#include "latgov/qos.hpp"
#include "scratch.hpp"

#include <algorithm>
#include <doctest/doctest.h>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <unistd.h>

using namespace latgov;
namespace fs = std::filesystem;

namespace {

// The journal in <root>/run.
struct Tree : test::QosTree {
    Tree(int cpus, const std::string& initial) : QosTree(cpus, initial, "run") {}
};

struct Killed : std::runtime_error {
    Killed() : std::runtime_error("killed") {}
};

void ignore(const std::string&) {}

LatencyLimit us(std::uint32_t n) {
    return LatencyLimit{n};
}

const TimePoint t0{};

// The changes of a daemon's life on two CPUs: onset, a move between two
// held limits, a second onset on another CPU, release of one, release of all.
const std::vector<std::map<int, LatencyLimit>> life = {
    {{0, us(20)}}, {{0, us(5)}}, {{0, us(5)}, {1, us(0)}},
    {{1, us(0)}},  {},           {{0, us(20)}, {1, us(20)}},
};

// Runs `life` on a fresh holder and kills it at its `kill_at`-th step;
// returns false if it ran to the end without reaching it.
bool run_and_kill(const Tree& tree, int kill_at) {
    PerCpuHolder holder(tree.sysroot(), tree.journal(), ignore);
    int steps = 0;
    holder.on_step = [&](std::string_view) {
        if (steps++ == kill_at)
            throw Killed();
    };
    try {
        for (const auto& wanted : life)
            holder.apply(wanted, t0);
        (void)holder.release_all(); // may be killed in there
    } catch (const Killed&) {
        return true;
    }
    return false;
}

} // namespace

TEST_CASE("a kill at any step of any change leaves a journal that restores the originals") {
    int kills = 0;
    for (int kill_at = 0;; ++kill_at) {
        CAPTURE(kill_at);
        Tree tree(3, "300\n");
        tree.set(2, "7\n"); // someone else's, never wanted by latgov
        if (!run_and_kill(tree, kill_at))
            break;
        ++kills;
        auto restored = restore_journal(tree.sysroot(), tree.journal(), ignore);
        CHECK(restored);
        CHECK(tree.value(0) == us(300));
        CHECK(tree.value(1) == us(300));
        CHECK(tree.value(2) == us(7));
        CHECK_FALSE(fs::exists(tree.journal()));
    }
    CHECK(kills > 10); // every onset, move and release was interrupted somewhere
}

TEST_CASE("a kill between journaling a move and writing it still restores the original") {
    // The file still holds the earlier held value, the journal already names
    // the new one: the earlier value must count as latgov's.
    Tree tree(1, "300\n");
    {
        PerCpuHolder holder(tree.sysroot(), tree.journal(), ignore);
        holder.apply({{0, us(20)}}, t0);
        REQUIRE(tree.value(0) == us(20));
        holder.on_step = [](std::string_view step) {
            if (step == "journaled")
                throw Killed();
        };
        CHECK_THROWS_AS(holder.apply({{0, us(5)}}, t0), Killed);
    }
    REQUIRE(tree.value(0) == us(20));
    CHECK(restore_journal(tree.sysroot(), tree.journal(), ignore));
    CHECK(tree.value(0) == us(300));
}

TEST_CASE("once a move landed, a kill keeps someone else's write of the value it replaced") {
    // Held at 20, moved to 5: the record named 20 too until 5 was written.
    // Someone then writes 20, and latgovd is killed before it looks again:
    // the 20 is theirs, and a restore must not put 300 over it.
    Tree tree(1, "300\n");
    {
        PerCpuHolder holder(tree.sysroot(), tree.journal(), ignore);
        holder.apply({{0, us(20)}}, t0);
        holder.apply({{0, us(5)}}, t0);
        REQUIRE(tree.value(0) == us(5));
        tree.set(0, "20\n");
    } // killed: no release
    CHECK(restore_journal(tree.sysroot(), tree.journal(), ignore));
    CHECK(tree.value(0) == us(20));
}

TEST_CASE("a restarted holder resumes from the journal an earlier run left") {
    Tree tree(2, "300\n");
    {
        PerCpuHolder holder(tree.sysroot(), tree.journal(), ignore);
        holder.apply({{0, us(20)}, {1, us(20)}}, t0);
    } // killed
    // The restore of cpu 1 fails (its file is gone for now), cpu 0's works.
    fs::rename(tree.slot(1), tree.slot(1).string() + ".away");
    CHECK_FALSE(restore_journal(tree.sysroot(), tree.journal(), ignore));
    CHECK(tree.value(0) == us(300));
    fs::rename(tree.slot(1).string() + ".away", tree.slot(1));
    REQUIRE(tree.value(1) == us(20));

    // The next run's journal keeps the entry it does not hold...
    PerCpuHolder holder(tree.sysroot(), tree.journal(), ignore);
    holder.apply({{0, us(10)}}, t0);
    auto journal = read_journal(tree.journal());
    REQUIRE(journal);
    bool kept = false;
    for (const auto& e : journal->entries)
        kept = kept || (e.cpu == 1 && e.original == us(300) && e.written == us(20));
    CHECK(kept);
    // ...and puts it back once it can.
    CHECK(tree.value(1) == us(300));
    CHECK(holder.release_all());
    CHECK(tree.value(0) == us(300));
    CHECK_FALSE(fs::exists(tree.journal()));
}

TEST_CASE("a bad journal line costs only itself: good entries are restored, the line kept") {
    Tree tree(2, "20");
    std::ofstream(tree.journal()) << "cpu 0 original 300 written 20\n"
                                  << "cpu 1 original 300 written\n"; // torn by hand
    auto restored = restore_journal(tree.sysroot(), tree.journal(), ignore);
    REQUIRE_FALSE(restored);
    CHECK(restored.error().message.find("line 2") != std::string::npos);
    CHECK(tree.value(0) == us(300));
    CHECK(tree.value(1) == us(20)); // unknown: left as it is
    auto left = read_journal(tree.journal());
    REQUIRE(left);
    CHECK(left->entries.empty());
    REQUIRE(left->bad_lines.size() == 1);
    CHECK(left->bad_lines[0] == "cpu 1 original 300 written");

    // A holder taking over the journal keeps that line too.
    {
        PerCpuHolder holder(tree.sysroot(), tree.journal(), ignore);
        holder.apply({{0, us(5)}}, t0);
        CHECK(holder.release_all()); // its own value is back; the line it cannot read stays
    }
    left = read_journal(tree.journal());
    REQUIRE(left);
    CHECK(left->bad_lines.size() == 1);
}

TEST_CASE("a value someone else set equal to neither the original nor latgov's stays") {
    Tree tree(1, "300\n");
    {
        PerCpuHolder holder(tree.sysroot(), tree.journal(), ignore);
        holder.apply({{0, us(20)}}, t0);
    }
    tree.set(0, "55\n");
    CHECK(restore_journal(tree.sysroot(), tree.journal(), ignore));
    CHECK(tree.value(0) == us(55));
}

// Whether each record of the journal says released, in CPU order.
std::vector<bool> released_records(const Tree& tree) {
    const auto journal = read_journal(tree.journal());
    REQUIRE(journal);
    std::vector<bool> released;
    for (const auto& entry : journal->entries)
        released.push_back(entry.released);
    return released;
}

TEST_CASE("prepared records make the onset one record write per CPU, before its file") {
    Tree tree(2, "300\n");
    PerCpuHolder holder(tree.sysroot(), tree.journal(), ignore);
    std::vector<std::string> steps;
    holder.on_step = [&](std::string_view step) { steps.emplace_back(step); };
    holder.prepare({{0, us(20)}, {1, us(20)}});
    CHECK(std::count(steps.begin(), steps.end(), "record") == 2);
    CHECK(tree.value(0) == us(300)); // nothing held yet
    CHECK(released_records(tree) == std::vector<bool>{true, true});

    // Each CPU: its record marked held, then its file written.
    steps.clear();
    holder.apply({{0, us(20)}, {1, us(20)}}, t0);
    CHECK(tree.value(0) == us(20));
    CHECK(steps == std::vector<std::string>{"record", "journaled", "written", "record", "journaled",
                                            "written"});
    CHECK(released_records(tree) == std::vector<bool>{false, false});

    // Released: the original back, then the record marked released. Held
    // again (the next burst): one record write again.
    steps.clear();
    holder.apply({{1, us(20)}}, t0);
    CHECK(tree.value(0) == us(300));
    CHECK(steps == std::vector<std::string>{"released", "record"});
    CHECK(released_records(tree) == std::vector<bool>{true, false});
    steps.clear();
    holder.apply({{0, us(20)}, {1, us(20)}}, t0);
    CHECK(std::count(steps.begin(), steps.end(), "record") == 1);

    // Killed while held: the prepared record restores it.
    holder.on_step = nullptr;
    CHECK(restore_journal(tree.sysroot(), tree.journal(), ignore));
    CHECK(tree.value(0) == us(300));
    CHECK(tree.value(1) == us(300));
}

TEST_CASE("a restore leaves latgov's value to someone else who wrote it while it was released") {
    // Killed before any check_records() could see the other writer: the
    // record says released, so their value is theirs, were it latgov's.
    Tree tree(1, "300\n");
    {
        PerCpuHolder holder(tree.sysroot(), tree.journal(), ignore);
        SUBCASE("journaled ahead by prepare()") {
            holder.prepare({{0, us(20)}});
        }
        SUBCASE("held, then released") {
            holder.apply({{0, us(20)}}, t0);
            holder.apply({}, t0);
        }
        REQUIRE(tree.value(0) == us(300));
        REQUIRE(released_records(tree) == std::vector<bool>{true});
        tree.set(0, "20\n");
    } // killed: no release_all()
    CHECK(restore_journal(tree.sysroot(), tree.journal(), ignore));
    CHECK(tree.value(0) == us(20));
    CHECK_FALSE(fs::exists(tree.journal()));
}

TEST_CASE("a restore does not read the CPU of a released record, nor fail on it") {
    Tree tree(2, "300\n");
    {
        PerCpuHolder holder(tree.sysroot(), tree.journal(), ignore);
        holder.apply({{0, us(20)}, {1, us(20)}}, t0);
        holder.apply({{1, us(20)}}, t0); // cpu 0 released, cpu 1 held
    }                                    // killed
    fs::remove(tree.slot(0));            // its file cannot be read now
    std::vector<std::string> log;
    CHECK(restore_journal(tree.sysroot(), tree.journal(),
                          [&](const std::string& line) { log.push_back(line); }));
    CHECK(tree.value(1) == us(300));
    CHECK_FALSE(fs::exists(tree.journal()));
    REQUIRE(log.size() == 1);
    CHECK(log[0] == "cpu 1: restored 300 from journal");
}

TEST_CASE("a prepared record goes stale when someone else changes the CPU, and is redone") {
    Tree tree(1, "300\n");
    PerCpuHolder holder(tree.sysroot(), tree.journal(), ignore);
    holder.prepare({{0, us(20)}});
    tree.set(0, "400\n");
    holder.apply({{0, us(20)}}, t0);
    REQUIRE(tree.value(0) == us(20));
    CHECK(restore_journal(tree.sysroot(), tree.journal(), ignore));
    CHECK(tree.value(0) == us(400));
}

TEST_CASE("an earlier run's record is taken over before the first decision") {
    // A run held cpu 0 at 20 (original 300) and was killed; the restore at
    // the next start could not put it back (its file was away for a moment).
    Tree tree(1, "300\n");
    {
        PerCpuHolder holder(tree.sysroot(), tree.journal(), ignore);
        holder.apply({{0, us(20)}}, t0);
    }
    fs::rename(tree.slot(0), tree.slot(0).string() + ".away");
    CHECK_FALSE(restore_journal(tree.sysroot(), tree.journal(), ignore));
    fs::rename(tree.slot(0).string() + ".away", tree.slot(0));
    REQUIRE(tree.value(0) == us(20));

    PerCpuHolder holder(tree.sysroot(), tree.journal(), ignore);
    SUBCASE("held anew: the original stays 300, not the 20 left there") {
        holder.apply({{0, us(10)}}, t0);
        CHECK(tree.value(0) == us(10));
        const auto& held = holder.held().at(0);
        CHECK(held.original == us(300));
        CHECK(held.replaced == us(20));
        CHECK(holder.release_all());
    }
    SUBCASE("held looser than the value left there: that value is what it replaced") {
        // 50 loosens the 20 left there: the CPU was no less constrained
        // before this write than after it, so nothing was tightened.
        auto mark = holder.writes();
        holder.apply({{0, us(50)}}, t0);
        CHECK(tree.value(0) == us(50));
        const auto& held = holder.held().at(0);
        CHECK(held.original == us(300));
        CHECK(held.written == us(50));
        CHECK(held.replaced == us(20));
        CHECK(holder.writes() == mark + 1);
        CHECK(holder.tightened_since(mark).empty());
        // Tightened in place: what it replaced is latgovd's own last write.
        mark = holder.writes();
        holder.apply({{0, us(5)}}, t0);
        CHECK(holder.held().at(0).replaced == us(50));
        CHECK(holder.tightened_since(mark) == std::vector<int>{0});
        CHECK(holder.release_all());
    }
    SUBCASE("wanted at the value left there: still put back on release") {
        // Written over the same value: the CPU was as constrained before.
        const auto mark = holder.writes();
        holder.apply({{0, us(20)}}, t0);
        CHECK(holder.writes() == mark + 1);
        CHECK(holder.tightened_since(mark).empty());
        holder.apply({}, t0);
    }
    SUBCASE("prepared first: the record is not taken for a fresh one") {
        holder.prepare({{0, us(10)}});
        holder.apply({{0, us(10)}}, t0);
        CHECK(holder.release_all());
    }
    SUBCASE("never wanted: put back at the first apply") {
        holder.apply({}, t0);
    }
    CHECK(tree.value(0) == us(300));
    CHECK(holder.release_all());
    CHECK_FALSE(fs::exists(tree.journal()));
}

namespace {

// A killed run left cpu 0 at 20 (original 300), the restore at the next
// start could not put it back, and now the journal cannot be read for a
// while (a symlink stands in its place). Returns where the journal is.
fs::path left_unreadable(const Tree& tree) {
    {
        PerCpuHolder holder(tree.sysroot(), tree.journal(), ignore);
        holder.apply({{0, us(20)}}, t0);
    }
    fs::rename(tree.slot(0), tree.slot(0).string() + ".away");
    CHECK_FALSE(restore_journal(tree.sysroot(), tree.journal(), ignore));
    fs::rename(tree.slot(0).string() + ".away", tree.slot(0));
    REQUIRE(tree.value(0) == us(20));
    const fs::path away = tree.journal().string() + ".away";
    fs::rename(tree.journal(), away);
    fs::create_symlink(away, tree.journal());
    return away;
}

void make_readable(const Tree& tree, const fs::path& away) {
    fs::remove(tree.journal());
    fs::rename(away, tree.journal());
}

} // namespace

TEST_CASE("an earlier run's journal that cannot be taken over yet holds nothing until it can") {
    Tree tree(1, "300\n");
    const auto away = left_unreadable(tree);
    std::vector<std::string> log;
    PerCpuHolder holder(tree.sysroot(), tree.journal(),
                        [&](const std::string& line) { log.push_back(line); });
    SUBCASE("wanted at the first apply") {
        holder.apply({{0, us(10)}}, t0);
    }
    SUBCASE("not wanted at the first apply") {
        holder.apply({}, t0);
    }
    SUBCASE("prepared first") {
        holder.prepare({{0, us(10)}});
    }
    // Taking the 20 there for the original would lose the 300 for good.
    CHECK(holder.held().empty());
    CHECK(tree.value(0) == us(20));
    holder.apply({{0, us(10)}}, t0);
    holder.check_records();
    CHECK(tree.value(0) == us(20));
    CHECK(log.size() == 1); // said once, not at every try
    CHECK((!log.empty() && log[0].find("not taken over yet") != std::string::npos));

    make_readable(tree, away);
    holder.apply({{0, us(10)}}, t0);
    CHECK(tree.value(0) == us(10));
    // Killed now, the journal would still put 300 back.
    auto journal = read_journal(tree.journal());
    REQUIRE(journal);
    REQUIRE(journal->entries.size() == 1);
    CHECK(journal->entries[0].original == us(300));
    CHECK(holder.release_all());
    CHECK(tree.value(0) == us(300));
    CHECK_FALSE(fs::exists(tree.journal()));
}

TEST_CASE("a stop before an earlier run's journal is taken over says its CPUs may be held") {
    // The daemon would log "every constraint released" and remove its
    // status while the earlier run's 20 is still on the CPU.
    Tree tree(1, "300\n");
    const auto away = left_unreadable(tree);
    std::vector<std::string> log;
    PerCpuHolder holder(tree.sysroot(), tree.journal(),
                        [&](const std::string& line) { log.push_back(line); });
    holder.apply({{0, us(10)}}, t0);
    CHECK(holder.held().empty());
    CHECK_FALSE(holder.release_all());
    CHECK(tree.value(0) == us(20));
    REQUIRE(log.size() == 2);
    CHECK(log[1].starts_with(tree.journal().string() +
                             ", left by an earlier run, is not taken over ("));
    CHECK(log[1].ends_with(": the CPUs it records may still be constrained, and `latgovd "
                           "--restore` puts them back"));
    // What the restore after the stop does.
    make_readable(tree, away);
    CHECK(restore_journal(tree.sysroot(), tree.journal(), ignore));
    CHECK(tree.value(0) == us(300));
}

TEST_CASE("an earlier run's journal not taken over at first is by a later record check") {
    // An idle machine: apply() may not run again for hours.
    Tree tree(1, "300\n");
    const auto away = left_unreadable(tree);
    PerCpuHolder holder(tree.sysroot(), tree.journal(), ignore);
    holder.apply({}, t0);
    CHECK(tree.value(0) == us(20));
    make_readable(tree, away);
    holder.check_records();
    CHECK(tree.value(0) == us(300));
    CHECK(holder.release_all());
    CHECK_FALSE(fs::exists(tree.journal()));
}

TEST_CASE("a stop that cannot finish keeps only what it could not put back") {
    // A line that cannot be parsed keeps the journal after release_all(); the
    // records of CPUs that hold their original again must not stay with it.
    Tree tree(2, "300\n");
    tree.set(0, "20\n"); // left by a killed run
    std::ofstream(tree.journal()) << "cpu 0 original 300 written 20\n"
                                  << "cpu 7 original 300 written\n"; // torn by hand
    {
        PerCpuHolder holder(tree.sysroot(), tree.journal(), ignore);
        holder.apply({{1, us(5)}}, t0); // puts cpu 0 back, holds cpu 1
        REQUIRE(tree.value(0) == us(300));
        REQUIRE(tree.value(1) == us(5));
        CHECK(holder.release_all()); // all its own back; the bad line stays
    }
    CHECK(tree.value(1) == us(300));
    auto left = read_journal(tree.journal());
    REQUIRE(left);
    CHECK(left->entries.empty());
    REQUIRE(left->bad_lines.size() == 1);
    CHECK(left->bad_lines[0] == "cpu 7 original 300 written");

    // Much later someone else writes the values latgov did: a restore
    // leaves them.
    tree.set(0, "20\n");
    tree.set(1, "5\n");
    CHECK_FALSE(restore_journal(tree.sysroot(), tree.journal(), ignore)); // the bad line
    CHECK(tree.value(0) == us(20));
    CHECK(tree.value(1) == us(5));
}

TEST_CASE("a holder told not to take over (--dry-run) leaves an earlier journal alone") {
    Tree tree(1, "300\n");
    {
        PerCpuHolder holder(tree.sysroot(), tree.journal(), ignore);
        holder.apply({{0, us(20)}}, t0);
    } // killed
    const auto before = read_journal(tree.journal());
    REQUIRE(before);
    PerCpuHolder holder(tree.sysroot(), tree.journal(), ignore, false);
    holder.apply({}, t0);
    holder.prepare({});
    holder.check_records();
    CHECK(holder.release_all());
    CHECK(tree.value(0) == us(20));
    const auto after = read_journal(tree.journal());
    REQUIRE(after);
    REQUIRE(after->entries.size() == 1);
    CHECK(format_journal_entry(after->entries[0]) == format_journal_entry(before->entries[0]));
}

TEST_CASE("a kept record is dropped once someone else writes the value latgov would") {
    // A record of a CPU latgov does not hold names a value it may write; a
    // restore would put the original back over the same value set by
    // someone else. Once latgov sees it, the record goes.
    Tree tree(1, "300\n");
    std::vector<std::string> log;
    PerCpuHolder holder(tree.sysroot(), tree.journal(),
                        [&](const std::string& line) { log.push_back(line); });
    SUBCASE("prepared, then theirs, seen by check_records()") {
        holder.prepare({{0, us(20)}});
        tree.set(0, "20\n");
        holder.check_records();
    }
    SUBCASE("released, then theirs, seen by check_records()") {
        holder.apply({{0, us(20)}}, t0);
        holder.apply({}, t0);
        REQUIRE(tree.value(0) == us(300));
        tree.set(0, "20\n");
        holder.check_records();
    }
    SUBCASE("prepared, then theirs, seen at the onset") {
        holder.prepare({{0, us(20)}});
        tree.set(0, "20\n");
        holder.apply({{0, us(20)}}, t0);
        CHECK(holder.held().empty()); // theirs already meets it
    }
    SUBCASE("prepared, then theirs, seen by the next prepare") {
        holder.prepare({{0, us(20)}});
        tree.set(0, "20\n");
        holder.prepare({{0, us(20)}});
    }
    REQUIRE(log.size() == 1);
    CHECK(log[0].find("cpu 0: pm_qos_resume_latency_us changed to 20 by someone else") !=
          std::string::npos);
    // Killed now: the restore leaves their value.
    CHECK(restore_journal(tree.sysroot(), tree.journal(), ignore));
    CHECK(tree.value(0) == us(20));
}

TEST_CASE("check_records() leaves the records of CPUs that hold their original or are held") {
    Tree tree(2, "300\n");
    PerCpuHolder holder(tree.sysroot(), tree.journal(), ignore);
    holder.prepare({{0, us(20)}});
    holder.apply({{1, us(20)}}, t0);
    holder.check_records();
    // Killed while cpu 1 is held: both records are still there to restore it.
    auto journal = read_journal(tree.journal());
    REQUIRE(journal);
    CHECK(journal->entries.size() == 2);
    CHECK(restore_journal(tree.sysroot(), tree.journal(), ignore));
    CHECK(tree.value(1) == us(300));
}

TEST_CASE("the journal is refused, and nothing written, when it is a symlink") {
    Tree tree(1, "300\n");
    const fs::path target = tree.journal().string() + ".target";
    std::ofstream(target) << "precious\n";
    fs::create_symlink(target, tree.journal());
    std::vector<std::string> lines;
    PerCpuHolder holder(tree.sysroot(), tree.journal(),
                        [&](const std::string& line) { lines.push_back(line); });
    holder.apply({{0, us(20)}}, t0);
    CHECK(tree.value(0) == us(300));
    CHECK(holder.held().empty());
    std::ifstream in(target);
    std::string text;
    std::getline(in, text);
    CHECK(text == "precious");
    REQUIRE_FALSE(lines.empty());
    CHECK(lines.front().find("symlink") != std::string::npos);
    CHECK_FALSE(restore_journal(tree.sysroot(), tree.journal(), ignore));
}

TEST_CASE("a hold that keeps failing is said once per hold wanted, and so is its end") {
    Tree tree(1, "300\n");
    // The journal's directory is not there: nothing can be journaled, so
    // nothing is held.
    const fs::path journal = tree.journal().parent_path() / "not-yet" / "journal";
    std::vector<std::string> log;
    PerCpuHolder holder(tree.sysroot(), journal,
                        [&](const std::string& line) { log.push_back(line); });
    const auto failures = [&] {
        return std::count_if(log.begin(), log.end(), [](const std::string& line) {
            return line.find("not constraining cpu 0") != std::string::npos;
        });
    };
    for (int tick = 0; tick < 5; ++tick) // tried again at every check
        holder.apply({{0, us(20)}}, t0);
    CHECK(tree.value(0) == us(300));
    CHECK(failures() == 1);
    holder.apply({}, t0); // the IO stopped; the next burst fails anew
    holder.apply({{0, us(20)}}, t0);
    CHECK(failures() == 2);
    fs::create_directories(journal.parent_path());
    holder.apply({{0, us(20)}}, t0);
    CHECK(tree.value(0) == us(20));
    REQUIRE_FALSE(log.empty());
    CHECK(log.back() == "cpu 0: constrained now; what failed before has passed");
    CHECK(holder.release_all());
    CHECK(tree.value(0) == us(300));
}
