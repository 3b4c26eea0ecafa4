// The QoS edge on a temp tree where pm_qos_resume_latency_us and
// /dev/cpu_dma_latency are plain files: what latgov writes, journals and puts
// back, and what it leaves to others.
#include "latgov/qos.hpp"
#include "scratch.hpp"

#include <cerrno>
#include <csignal>
#include <cstdint>
#include <cstring>
#include <doctest/doctest.h>
#include <fcntl.h>
#include <filesystem>
#include <fstream>
#include <functional>
#include <optional>
#include <sstream>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

using namespace latgov;
namespace fs = std::filesystem;

namespace {

using test::QosTree;

struct Log {
    std::vector<std::string> lines;
    LogSink sink() {
        return [this](const std::string& line) { lines.push_back(line); };
    }
    bool mentions(const std::string& text) const {
        for (const auto& line : lines)
            if (line.find(text) != std::string::npos)
                return true;
        return false;
    }
};

const TimePoint t0{};

LatencyLimit us(std::uint32_t n) {
    return LatencyLimit{n};
}

std::vector<JournalEntry> journal_of(const QosTree& tree) {
    auto entries = read_journal(tree.journal());
    REQUIRE(entries);
    return entries->entries;
}

} // namespace

TEST_CASE("PerCpuHolder writes only the wanted CPUs and journals their originals") {
    QosTree tree(4);
    tree.set(2, "300\n");
    Log log;
    PerCpuHolder holder(tree.sysroot(), tree.journal(), log.sink());
    holder.apply({{1, us(20)}, {2, us(0)}, {3, LatencyLimit{}}}, t0);

    CHECK(tree.get(0) == "0\n");
    CHECK(tree.get(1) == "20");
    CHECK(tree.get(2) == "n/a");
    CHECK(tree.get(3) == "0\n"); // "no limit" wanted: nothing to hold
    CHECK(holder.held().size() == 2);
    CHECK(holder.held().at(2).replaced == us(300));

    auto entries = journal_of(tree);
    REQUIRE(entries.size() == 2);
    CHECK(entries[0].cpu == 1);
    CHECK(entries[0].original == LatencyLimit{});
    CHECK(entries[0].written == us(20));
    CHECK(entries[1].cpu == 2);
    CHECK(entries[1].original == us(300));
    CHECK(entries[1].written == us(0));
}

TEST_CASE("PerCpuHolder says which CPUs its writes since a mark tightened") {
    QosTree tree(4);
    tree.set(2, "300\n");
    Log log;
    PerCpuHolder holder(tree.sysroot(), tree.journal(), log.sink());
    CHECK(holder.writes() == 0);
    holder.apply({{1, us(20)}, {2, us(0)}, {3, us(400)}}, t0);
    // Each written stricter than its file held: no limit (1, 3), 300 (2).
    CHECK(holder.tightened_since(0) == std::vector<int>{1, 2, 3});
    // Nothing written since: nothing tightened, whatever is held.
    const auto mark = holder.writes();
    holder.apply({{1, us(20)}, {2, us(0)}, {3, us(400)}}, t0);
    CHECK(holder.writes() == mark);
    CHECK(holder.tightened_since(mark).empty());
    // One CPU tightened, one loosened, one left: the first only.
    holder.apply({{1, us(10)}, {2, us(50)}, {3, us(400)}}, t0);
    CHECK(holder.writes() == mark + 2);
    CHECK(holder.tightened_since(mark) == std::vector<int>{1});
    CHECK(holder.release_all());
}

TEST_CASE("PerCpuHolder does not write a CPU it could not journal") {
    QosTree tree(2);
    Log log;
    // The journal's directory is missing, so the journal cannot be written;
    // a write now could never be undone after a crash.
    PerCpuHolder holder(tree.sysroot(), tree.root() / "missing/journal", log.sink());
    holder.apply({{1, us(20)}}, t0);
    CHECK(tree.get(1) == "0\n");
    CHECK(holder.held().empty());
    CHECK(log.mentions("Failed to write"));
}

TEST_CASE("a journal in an open directory stays there when its path is pointed elsewhere") {
    // latgovd checks its runtime directory once and reaches the journal
    // through the descriptor it checked. By path, a directory swapped in
    // after the check (here: renamed away, another put in its place) would
    // get the journal, and a restore would read that one.
    for (const bool open_directory : {true, false}) {
        CAPTURE(open_directory);
        QosTree tree(2);
        const fs::path run = tree.journal().parent_path();
        Fd dir(::open(run.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
        REQUIRE(dir);
        auto place = open_directory ? JournalPlace::in_directory(dir.get(), tree.journal())
                                    : Result<JournalPlace>(JournalPlace(tree.journal()));
        REQUIRE(place);
        Log log;
        PerCpuHolder holder(tree.sysroot(), *place, log.sink());
        fs::rename(run, run.string() + ".checked");
        fs::create_directory(run);

        holder.apply({{1, us(20)}}, t0);
        REQUIRE(tree.get(1) == "20");
        const fs::path checked = run.string() + ".checked/journal";
        CHECK(fs::exists(checked) == open_directory);
        CHECK(fs::exists(tree.journal()) == !open_directory);

        auto text = read_journal(*place);
        REQUIRE(text);
        REQUIRE(text->entries.size() == 1);
        CHECK(text->entries.front().cpu == 1);
        CHECK(holder.release_all());
        CHECK(tree.get(1) == "0");
        CHECK_FALSE(fs::exists(checked));
        CHECK_FALSE(fs::exists(tree.journal()));

        // A restore through the same place reads the same journal.
        REQUIRE(write_journal(*place, {{0, LatencyLimit{}, us(20)}}));
        tree.set(0, "20");
        REQUIRE(restore_journal(tree.sysroot(), *place, log.sink()));
        CHECK(tree.get(0) == "0");
        CHECK_FALSE(fs::exists(checked));
    }
}

TEST_CASE("release puts back the original, and the journal goes with the last CPU") {
    QosTree tree(3, "500\n");
    Log log;
    PerCpuHolder holder(tree.sysroot(), tree.journal(), log.sink());
    holder.apply({{0, us(20)}, {1, us(30)}}, t0);
    REQUIRE(tree.get(0) == "20");
    REQUIRE(tree.get(1) == "30");

    holder.apply({{1, us(30)}}, t0);
    CHECK(tree.get(0) == "500");
    CHECK(tree.get(1) == "30");
    // CPU 0's record stays, journaled for its next hold; the file holds its
    // original, so a restore now would leave it as it is.
    REQUIRE(journal_of(tree).size() == 2);
    CHECK(journal_of(tree)[0].cpu == 0);
    CHECK(journal_of(tree)[0].original == us(500));

    CHECK(holder.release_all());
    CHECK(tree.get(1) == "500");
    CHECK(holder.held().empty());
    CHECK_FALSE(fs::exists(tree.journal()));
}

TEST_CASE("a release that failed is retried by the next record check, with no new hold") {
    QosTree tree(2);
    Log log;
    PerCpuHolder holder(tree.sysroot(), tree.journal(), log.sink());
    holder.apply({{1, us(0)}}, t0);
    REQUIRE(tree.get(1) == "n/a");
    tree.set(1, "garbage\n"); // the release cannot read what the file holds
    holder.apply({}, t0);
    CHECK(log.mentions("kept in the journal, retried later"));
    CHECK(holder.held().empty());
    // Readable again, still latgov's value: the daemon's next check (every
    // housekeeping tick, IO or not) puts the original back.
    tree.set(1, "n/a\n");
    holder.check_records();
    CHECK(tree.get(1) == "0");
    CHECK(log.mentions("cpu 1: restored 0"));
}

TEST_CASE("a stricter value someone else set is kept, not journaled, and survives") {
    QosTree tree(2);
    tree.set(1, "5\n");
    Log log;
    PerCpuHolder holder(tree.sysroot(), tree.journal(), log.sink());

    SUBCASE("stricter") {
        holder.apply({{1, us(20)}}, t0);
    }
    SUBCASE("equal") {
        holder.apply({{1, us(5)}}, t0);
    }
    CHECK(tree.get(1) == "5\n");
    CHECK(holder.held().empty());
    CHECK_FALSE(fs::exists(tree.journal()));

    holder.apply({}, t0);
    CHECK(holder.release_all());
    CHECK(tree.get(1) == "5\n");
}

TEST_CASE("a looser value someone else set is overridden and put back on release") {
    QosTree tree(2);
    tree.set(1, "200\n");
    Log log;
    PerCpuHolder holder(tree.sysroot(), tree.journal(), log.sink());
    holder.apply({{1, us(20)}}, t0);
    CHECK(tree.get(1) == "20");
    REQUIRE(journal_of(tree).size() == 1);
    CHECK(journal_of(tree)[0].original == us(200));

    CHECK(holder.release_all());
    CHECK(tree.get(1) == "200");
}

TEST_CASE("someone changing a held CPU is logged, not fought, and released without a write") {
    QosTree tree(2);
    Log log;
    PerCpuHolder holder(tree.sysroot(), tree.journal(), log.sink());
    holder.apply({{1, us(20)}}, t0);
    REQUIRE(tree.get(1) == "20");

    SUBCASE("to a looser value") {
        tree.set(1, "100\n");
    }
    SUBCASE("to no limit") {
        tree.set(1, "0\n");
    }
    SUBCASE("to a stricter value") {
        tree.set(1, "n/a\n");
    }
    const std::string theirs = tree.get(1);

    holder.apply({{1, us(20)}}, t0);
    CHECK(log.mentions("cpu 1: pm_qos_resume_latency_us changed to"));
    CHECK(log.mentions("by someone else"));
    CHECK(tree.get(1) == theirs);
    CHECK(holder.held().empty());
    CHECK(journal_of(tree).empty());

    holder.apply({{1, us(20)}}, t0); // and on the next tick too
    CHECK(tree.get(1) == theirs);

    CHECK(holder.release_all());
    CHECK(tree.get(1) == theirs);
}

TEST_CASE("after yielding, a limit stays theirs across a release, and a later value becomes "
          "the original") {
    QosTree tree(2);
    Log log;
    PerCpuHolder holder(tree.sysroot(), tree.journal(), log.sink());
    holder.apply({{1, us(20)}}, t0);
    tree.set(1, "100\n");
    holder.apply({{1, us(20)}}, t0);
    REQUIRE(tree.get(1) == "100\n");
    holder.apply({}, t0); // released: still theirs (unlike a change to 0)
    REQUIRE(holder.yielded().count(1) == 1);
    holder.apply({{1, us(20)}}, t0);
    holder.prepare({{1, us(20)}});
    CHECK(tree.get(1) == "100\n");
    CHECK(journal_of(tree).empty());

    tree.set(1, "300\n"); // they moved on
    holder.apply({{1, us(20)}}, t0);
    CHECK(tree.get(1) == "20");
    REQUIRE(journal_of(tree).size() == 1);
    CHECK(journal_of(tree)[0].original == us(300));
    CHECK(holder.release_all());
    CHECK(tree.get(1) == "300");
}

TEST_CASE("a CPU that is released while someone else changed it is left alone") {
    QosTree tree(2);
    Log log;
    PerCpuHolder holder(tree.sysroot(), tree.journal(), log.sink());
    holder.apply({{0, us(20)}}, t0);
    tree.set(0, "40\n");
    holder.apply({}, t0);
    CHECK(tree.get(0) == "40\n");
    CHECK(log.mentions("by someone else"));
    CHECK(journal_of(tree).empty());
}

TEST_CASE("an unchanged limit is not written again") {
    QosTree tree(2);
    Log log;
    PerCpuHolder holder(tree.sysroot(), tree.journal(), log.sink());
    holder.apply({{1, us(20)}}, t0);
    REQUIRE(tree.get(1) == "20");
    // Same value, different bytes: a rewrite would turn it back into "20".
    tree.set(1, "20\n");
    holder.apply({{1, us(20)}}, t0);
    CHECK(tree.get(1) == "20\n");
    CHECK(holder.held().count(1) == 1);
}

TEST_CASE("a held CPU moves to a new limit and keeps its original and start time") {
    QosTree tree(2, "500\n");
    Log log;
    PerCpuHolder holder(tree.sysroot(), tree.journal(), log.sink());
    const TimePoint t1 = t0 + std::chrono::seconds(5);
    holder.apply({{1, us(20)}}, t0);
    holder.apply({{1, us(10)}}, t1);
    CHECK(tree.get(1) == "10");
    REQUIRE(holder.held().count(1) == 1);
    CHECK(holder.held().at(1).original == us(500));
    CHECK(holder.held().at(1).since == t0);
    REQUIRE(journal_of(tree).size() == 1);
    CHECK(journal_of(tree)[0].written == us(10));
    CHECK(holder.release_all());
    CHECK(tree.get(1) == "500");
}

TEST_CASE("a held CPU whose original already meets the new limit gets its original back") {
    QosTree tree(2, "100\n");
    Log log;
    PerCpuHolder holder(tree.sysroot(), tree.journal(), log.sink());
    holder.apply({{1, us(20)}}, t0);
    REQUIRE(tree.get(1) == "20");
    holder.apply({{1, us(200)}}, t0); // writing 200 would weaken their 100
    CHECK(tree.get(1) == "100");
    CHECK(holder.held().empty());
    CHECK(holder.release_all());
    CHECK_FALSE(fs::exists(tree.journal()));
}

TEST_CASE("restore_journal puts back originals and leaves values changed by others") {
    QosTree tree(3);
    tree.set(0, "20\n");  // still what latgov wrote
    tree.set(1, "7\n");   // latgov wrote n/a, someone wrote 7 since
    tree.set(2, "n/a\n"); // latgov wrote n/a
    REQUIRE(write_journal(tree.journal(),
                          {{0, LatencyLimit{}, us(20)}, {1, us(300), us(0)}, {2, us(300), us(0)}}));
    Log log;
    auto restored = restore_journal(tree.sysroot(), tree.journal(), log.sink());
    CHECK(restored);
    CHECK(tree.get(0) == "0");
    CHECK(tree.get(1) == "7\n");
    CHECK(tree.get(2) == "300");
    CHECK(log.mentions("cpu 1: value is 7"));
    CHECK_FALSE(fs::exists(tree.journal()));
}

TEST_CASE("restore_journal after a crash undoes a PerCpuHolder's writes") {
    QosTree tree(2, "250\n");
    Log log;
    {
        PerCpuHolder holder(tree.sysroot(), tree.journal(), log.sink());
        holder.apply({{0, us(20)}, {1, us(0)}}, t0);
        REQUIRE(tree.get(1) == "n/a");
        // Destroyed without release_all: as if the daemon were killed.
    }
    REQUIRE(fs::exists(tree.journal()));
    CHECK(restore_journal(tree.sysroot(), tree.journal(), log.sink()));
    CHECK(tree.get(0) == "250");
    CHECK(tree.get(1) == "250");
    CHECK_FALSE(fs::exists(tree.journal()));
}

TEST_CASE("a journal of an earlier boot is removed, nothing of it put back") {
    // A runtime directory not on tmpfs keeps the journal across a reboot.
    QosTree tree(2);
    const auto boot_file = tree.root() / "proc/sys/kernel/random/boot_id";
    fs::create_directories(boot_file.parent_path());
    std::ofstream(boot_file) << "new-boot\n";
    // Since the boot, someone set what latgov had written before it.
    tree.set(1, "20\n");
    REQUIRE(write_journal(tree.journal(), {{1, LatencyLimit{}, us(20)}}, {"cpu 9 garbled"},
                          {.boot_id = "old-boot"}));
    Log log;
    REQUIRE(restore_journal(tree.sysroot(), tree.journal(), log.sink()));
    CHECK(tree.get(1) == "20\n");
    CHECK_FALSE(fs::exists(tree.journal()));
    CHECK(log.mentions("was written during an earlier boot (old-boot)"));

    // This boot's, or one that names none (an older latgov's): put back.
    for (const char* boot : {"new-boot", ""}) {
        CAPTURE(boot);
        tree.set(1, "20\n");
        REQUIRE(
            write_journal(tree.journal(), {{1, LatencyLimit{}, us(20)}}, {}, {.boot_id = boot}));
        REQUIRE(restore_journal(tree.sysroot(), tree.journal(), log.sink()));
        CHECK(tree.get(1) == "0");
    }

    // A holder takes over nothing of an earlier boot's, and names its own.
    tree.set(1, "20\n");
    REQUIRE(
        write_journal(tree.journal(), {{1, LatencyLimit{}, us(20)}}, {}, {.boot_id = "old-boot"}));
    {
        PerCpuHolder holder(tree.sysroot(), tree.journal(), log.sink());
        holder.apply({{0, us(5)}}, t0);
        auto text = read_journal(tree.journal());
        REQUIRE(text);
        CHECK(text->boot_id == "new-boot");
        REQUIRE(text->entries.size() == 1);
        CHECK(text->entries[0].cpu == 0);
        CHECK(holder.release_all());
    }
    CHECK(tree.get(1) == "20\n");
    CHECK(tree.get(0) == "0");
}

TEST_CASE("a journal of another root is neither put back nor taken over, and kept") {
    // A run on a captured tree (--sysroot) killed while it held, and a run
    // on another root with the same runtime directory after it.
    QosTree tree(2);
    const std::string elsewhere = "/var/tmp/another-tree";
    const std::vector<JournalEntry> held{{1, LatencyLimit{}, us(20)}};
    REQUIRE(write_journal(tree.journal(), held, {}, {.root = elsewhere}));
    const std::string before = test::slurp(tree.journal());
    tree.set(1, "20\n"); // as the other root's value was: latgov may have written it
    Log log;
    auto restored = restore_journal(tree.sysroot(), tree.journal(), log.sink());
    REQUIRE_FALSE(restored);
    const std::string ours = journal_root_of(tree.sysroot());
    CHECK(ours == fs::canonical(tree.root()).string());
    CHECK(restored.error().message ==
          tree.journal().string() + " records the CPUs of the tree " + elsewhere +
              ", not of the tree " + ours +
              ": nothing of it is put back or taken over here, and it is kept for "
              "`latgovd --restore --sysroot " +
              elsewhere + " --runtime-dir " + tree.journal().parent_path().string() +
              "` (if that tree is gone, so are its CPUs: remove the journal)");
    CHECK(tree.get(1) == "20\n");
    CHECK(test::slurp(tree.journal()) == before);
    {
        PerCpuHolder holder(tree.sysroot(), tree.journal(), log.sink());
        holder.apply({{0, us(5)}}, t0);
        CHECK(holder.held().empty());
        CHECK(log.mentions("records the CPUs of the tree " + elsewhere));
        CHECK(holder.release_all());
    }
    CHECK(tree.get(0) == "0\n");
    CHECK(test::slurp(tree.journal()) == before);

    // The live system's journal under a tree: the restore it names has no --sysroot.
    REQUIRE(write_journal(tree.journal(), held, {}, {.root = "/"}));
    restored = restore_journal(tree.sysroot(), tree.journal(), log.sink());
    REQUIRE_FALSE(restored);
    CHECK(restored.error().message.find("records the CPUs of the live system (/), not of the "
                                        "tree " +
                                        ours) != std::string::npos);
    CHECK(restored.error().message.ends_with("`latgovd --restore --runtime-dir " +
                                             tree.journal().parent_path().string() + "`"));

    // A root of any bytes is named exactly, and quoted in the restore named.
    const std::string odd = "/var/tmp/it's a\ntree ";
    REQUIRE(write_journal(tree.journal(), held, {}, {.root = odd}));
    CHECK(read_journal(tree.journal())->root == odd);
    restored = restore_journal(tree.sysroot(), tree.journal(), log.sink());
    REQUIRE_FALSE(restored);
    CHECK(restored.error().message.find("--sysroot '/var/tmp/it'\\''s a\ntree ' --runtime-dir") !=
          std::string::npos);

    // The same root spelt another way (a symlink to it, a "." in it) is this
    // one, and so is a journal that names none (an older latgov's): put back.
    const fs::path link = tree.root().parent_path() / (tree.root().filename().string() + "-link");
    fs::create_directory_symlink(tree.root(), link);
    for (const std::string& named : {(link / ".").string(), std::string()}) {
        CAPTURE(named);
        tree.set(1, "20\n");
        REQUIRE(write_journal(tree.journal(), held, {}, {.root = named.empty() ? "" : ours}));
        REQUIRE(restore_journal(SysRoot(named.empty() ? tree.root() : fs::path(named)),
                                tree.journal(), log.sink()));
        CHECK(tree.get(1) == "0");
        CHECK_FALSE(fs::exists(tree.journal()));
    }
    fs::remove(link);

    // A holder names its root, and a restore under that root puts it back.
    {
        PerCpuHolder holder(tree.sysroot(), tree.journal(), log.sink());
        holder.apply({{0, us(5)}}, t0);
        auto text = read_journal(tree.journal());
        REQUIRE(text);
        CHECK(text->root == ours);
    } // abandoned holding, as a kill leaves it
    CHECK(tree.get(0) == "5");
    REQUIRE(restore_journal(tree.sysroot(), tree.journal(), log.sink()));
    CHECK(tree.get(0) == "0");
}

TEST_CASE("restore_journal without a journal is fine and writes nothing") {
    QosTree tree(1);
    Log log;
    CHECK(restore_journal(tree.sysroot(), tree.journal(), log.sink()));
    CHECK(tree.get(0) == "0\n");
    CHECK(log.lines.empty());
}

TEST_CASE("restore_journal keeps the entries it could not put back") {
    QosTree tree(1);
    tree.set(0, "20\n");
    // CPU 9 is there, its file cannot be read (for now).
    fs::create_directories(tree.slot(9).parent_path());
    REQUIRE(write_journal(tree.journal(), {{0, LatencyLimit{}, us(20)}, {9, us(300), us(0)}}));
    Log log;
    auto restored = restore_journal(tree.sysroot(), tree.journal(), log.sink());
    REQUIRE_FALSE(restored);
    CHECK(restored.error().message.find(tree.journal().string()) != std::string::npos);
    CHECK(tree.get(0) == "0");
    auto left = journal_of(tree);
    REQUIRE(left.size() == 1);
    CHECK(left[0].cpu == 9);
}

TEST_CASE("the record of a CPU that was hot-removed is dropped, by a restore or a holder") {
    // The kernel drops a removed CPU's PM QoS request with its device:
    // there is nothing to put back, and a record kept would fail every
    // restore (and every stop of the unit) for ever.
    QosTree tree(2);
    REQUIRE(write_journal(tree.journal(), {{1, LatencyLimit{}, us(0)}, {5, us(300), us(0)}}));
    tree.set(1, "n/a");
    Log log;
    CHECK(restore_journal(tree.sysroot(), tree.journal(), log.sink()));
    CHECK(log.mentions("cpu 5 no longer exists"));
    CHECK(tree.get(1) == "0");
    CHECK_FALSE(fs::exists(tree.journal()));

    // A record a start-up restore could not put back (CPU 5 was there, its
    // file unreadable) is adopted by the holder, which retries it at each
    // check; the CPU is removed meanwhile. (A CPU removed while held is
    // dropped by the same check once released: its reads fail.)
    fs::create_directories(tree.slot(5).parent_path());
    REQUIRE(write_journal(tree.journal(), {{5, us(300), us(0)}}));
    Log held_log;
    PerCpuHolder holder(tree.sysroot(), tree.journal(), held_log.sink());
    holder.apply({{0, us(0)}}, t0);
    REQUIRE(tree.get(0) == "n/a");
    fs::remove_all(tree.slot(5).parent_path().parent_path());
    holder.check_records();
    CHECK(held_log.mentions("cpu 5 no longer exists"));
    CHECK(holder.release_all());
    CHECK(tree.get(0) == "0");
    CHECK_FALSE(fs::exists(tree.journal()));

    // A CPU removed while held: its release cannot read it, and the record
    // goes at once.
    PerCpuHolder holding(tree.sysroot(), tree.journal(), held_log.sink());
    holding.apply({{1, us(20)}}, t0);
    REQUIRE(tree.get(1) == "20");
    fs::remove_all(tree.slot(1).parent_path().parent_path());
    holding.apply({}, t0);
    CHECK(held_log.mentions("cpu 1 no longer exists"));
    CHECK(holding.held().empty());
    CHECK(holding.release_all());
    CHECK_FALSE(fs::exists(tree.journal()));
}

TEST_CASE("no record is dropped as a removed CPU's when the CPUs' directory is missing") {
    // A wrong --sysroot, or /sys not mounted: no CPU directory is there, and
    // none of the CPUs was removed.
    QosTree tree(1);
    tree.set(0, "20\n");
    REQUIRE(write_journal(tree.journal(), {{0, us(300), us(20)}, {5, us(300), us(0)}}));
    fs::remove_all(tree.root() / "sys/devices"); // an empty /sys
    Log log;
    SUBCASE("by a restore") {
        CHECK_FALSE(restore_journal(tree.sysroot(), tree.journal(), log.sink()));
    }
    SUBCASE("by a holder") {
        PerCpuHolder holder(tree.sysroot(), tree.journal(), log.sink());
        holder.apply({}, t0);
        holder.check_records();
        CHECK_FALSE(holder.release_all()); // nothing to put back where it belongs
    }
    CHECK_FALSE(log.mentions("no longer exists"));
    CHECK(journal_of(tree).size() == 2);
}

namespace {

// A file size limit makes a write to a plain file short: the bytes below it
// go, the rest do not, and errno says nothing.
class FileSizeLimit {
  public:
    explicit FileSizeLimit(rlim_t bytes) {
        ::getrlimit(RLIMIT_FSIZE, &saved_);
        handler_ = std::signal(SIGXFSZ, SIG_IGN);
        const rlimit limit{bytes, saved_.rlim_max};
        ok_ = ::setrlimit(RLIMIT_FSIZE, &limit) == 0;
    }
    ~FileSizeLimit() {
        ::setrlimit(RLIMIT_FSIZE, &saved_);
        std::signal(SIGXFSZ, handler_);
    }
    FileSizeLimit(const FileSizeLimit&) = delete;
    FileSizeLimit& operator=(const FileSizeLimit&) = delete;
    bool ok() const { return ok_; }

  private:
    rlimit saved_{};
    void (*handler_)(int) = nullptr;
    bool ok_ = false;
};

} // namespace

TEST_CASE("a released mark that could not be written is written by the next record check") {
    QosTree tree(3, "500\n");
    Log log;
    PerCpuHolder holder(tree.sysroot(), tree.journal(), log.sink());
    holder.apply({{0, us(20)}, {1, us(30)}}, t0);
    REQUIRE(tree.get(1) == "30");
    const auto record_of = [&](int cpu) {
        for (const JournalEntry& e : journal_of(tree))
            if (e.cpu == cpu)
                return std::optional<JournalEntry>(e);
        return std::optional<JournalEntry>();
    };
    {
        // CPU 1's file (a few bytes) can be written; its journal record,
        // past the first 256 bytes, cannot.
        FileSizeLimit limit(64);
        REQUIRE(limit.ok());
        holder.apply({{0, us(20)}}, t0);
    }
    CHECK(tree.get(1) == "500");
    CHECK(log.mentions("cpu 1: failed to mark its journal record released (Failed to write " +
                       tree.journal().string() + ": File too large)"));
    REQUIRE(record_of(1));
    CHECK_FALSE(record_of(1)->released);
    holder.check_records();
    REQUIRE(record_of(1));
    CHECK(record_of(1)->released);
    CHECK_FALSE(record_of(0)->released); // still held
    // Someone else now writes latgov's value: a restore leaves it to them.
    tree.set(1, "30\n");
    Log restore_log;
    CHECK(restore_journal(tree.sysroot(), tree.journal(), restore_log.sink()));
    CHECK(tree.get(1) == "30\n");
    CHECK(tree.get(0) == "500");
}

TEST_CASE("a short write is reported as one, not with a stale errno") {
    QosTree tree(2, "0\n");
    SUBCASE("of a CPU's file") {
        ResumeLatencyFile file(tree.sysroot(), 0);
        REQUIRE(file.read());
        Result<void> written;
        {
            FileSizeLimit limit(1);
            REQUIRE(limit.ok());
            errno = ENOTTY;
            written = file.write(us(300));
        }
        REQUIRE_FALSE(written);
        CHECK(written.error().message.find("short write (1 of 3 bytes)") != std::string::npos);
    }
    SUBCASE("of a journal record") {
        Log log;
        PerCpuHolder holder(tree.sysroot(), tree.journal(), log.sink());
        holder.apply({{0, us(20)}}, t0);
        REQUIRE(tree.get(0) == "20");
        {
            // cpu 1's record is a new one at the end of the journal.
            FileSizeLimit limit(fs::file_size(tree.journal()) + 10);
            REQUIRE(limit.ok());
            errno = ENOTTY;
            holder.apply({{0, us(20)}, {1, us(20)}}, t0);
        }
        CHECK(tree.get(1) == "0\n"); // not journaled, not written
        CHECK(log.mentions("short write (10 of"));
        CHECK(log.mentions("not constraining cpu 1"));
    }
    SUBCASE("of /dev/cpu_dma_latency") {
        const auto dev = tree.root() / "dev/cpu_dma_latency";
        fs::create_directories(dev.parent_path());
        std::ofstream(dev).flush();
        Log log;
        GlobalHolder global(tree.sysroot(), log.sink());
        {
            FileSizeLimit limit(2);
            REQUIRE(limit.ok());
            errno = ENOTTY;
            global.apply(us(20), t0);
        }
        CHECK_FALSE(global.holding());
        CHECK(log.mentions("short write (2 of 4 bytes)"));
    }
}

namespace {

// What hot-removing a CPU's device and adding it back does to its file: the
// old one goes (on sysfs its reads then fail with ENODEV), and the new
// device's file shows its own value, no constraint.
void replug(const QosTree& tree, int cpu, const std::string& text = "0\n") {
    fs::remove_all(tree.slot(cpu).parent_path().parent_path());
    tree.set(cpu, text);
}

} // namespace

TEST_CASE("ResumeLatencyFile tells a file replaced by a new device from a new value") {
    QosTree tree(2);
    ResumeLatencyFile file(tree.sysroot(), 1);
    auto value = [&] {
        auto read = file.read();
        REQUIRE(read);
        return *read;
    };
    CHECK(value() == LatencyLimit{});
    CHECK_FALSE(file.take_replaced()); // the first open has nothing to compare with

    tree.set(1, "20\n"); // written in place: the same file
    CHECK(value() == us(20));
    CHECK_FALSE(file.take_replaced());

    replug(tree, 1);
    CHECK(value() == LatencyLimit{});
    CHECK(file.take_replaced());
    CHECK_FALSE(file.take_replaced()); // reported once

    // Removed, read while gone, then added back: the file opened then is new.
    fs::remove_all(tree.slot(1).parent_path().parent_path());
    CHECK_FALSE(file.read());
    tree.set(1, "0\n");
    CHECK(value() == LatencyLimit{});
    CHECK(file.take_replaced());
}

TEST_CASE("a CPU removed and added back is constrained again, its new value the original") {
    // The kernel dropped latgov's request with the old device; the new one
    // reads 0 (no constraint), which nobody else wrote.
    QosTree tree(2, "500\n");
    Log log;
    PerCpuHolder holder(tree.sysroot(), tree.journal(), log.sink());
    holder.apply({{1, us(20)}}, t0);
    REQUIRE(tree.get(1) == "20");
    REQUIRE(journal_of(tree).size() == 1);
    REQUIRE(journal_of(tree)[0].original == us(500));

    SUBCASE("noticed by the next hold") {
        replug(tree, 1);
    }
    SUBCASE("noticed by a hold while it is gone, and the next once it is back") {
        fs::remove_all(tree.slot(1).parent_path().parent_path());
        holder.apply({{1, us(20)}}, t0);
        CHECK(log.mentions("not constraining cpu 1"));
        tree.set(1, "0\n");
    }
    SUBCASE("noticed by a release, which puts nothing back") {
        replug(tree, 1);
        holder.apply({}, t0);
        CHECK(tree.get(1) == "0\n"); // not the old device's 500
        CHECK(holder.held().empty());
        CHECK(journal_of(tree).empty());
    }
    SUBCASE("noticed by a record check, which puts nothing back either") {
        holder.apply({}, t0);
        REQUIRE(tree.get(1) == "500");
        replug(tree, 1);
        holder.check_records();
        CHECK(tree.get(1) == "0\n");
        CHECK(journal_of(tree).empty());
    }
    CHECK(holder.yielded().empty());

    holder.apply({{1, us(20)}}, t0);
    CHECK(tree.get(1) == "20");
    CHECK(holder.held().count(1) == 1);
    CHECK(holder.yielded().empty());
    CHECK(log.mentions("cpu 1 was removed and added back"));
    CHECK_FALSE(log.mentions("by someone else"));
    // The journal names the new device's original: a restore after a kill
    // puts back 0, not the old device's 500.
    auto entries = journal_of(tree);
    REQUIRE(entries.size() == 1);
    CHECK(entries[0].cpu == 1);
    CHECK(entries[0].original == LatencyLimit{});
    CHECK(entries[0].written == us(20));

    CHECK(holder.release_all());
    CHECK(tree.get(1) == "0");
    CHECK_FALSE(fs::exists(tree.journal()));
}

TEST_CASE("a CPU added back and held again is tightened anew, one held all along is not") {
    QosTree tree(2);
    Log log;
    PerCpuHolder holder(tree.sysroot(), tree.journal(), log.sink());
    holder.apply({{0, us(20)}, {1, us(20)}}, t0);
    replug(tree, 1);
    // The same limits wanted: CPU 1 is written over its new device's no
    // limit (and woken by latgovd), CPU 0 is left as it is.
    const auto mark = holder.writes();
    holder.apply({{0, us(20)}, {1, us(20)}}, t0);
    CHECK(tree.get(1) == "20");
    CHECK(holder.writes() == mark + 1);
    CHECK(holder.tightened_since(mark) == std::vector<int>{1});
    CHECK(holder.release_all());
}

TEST_CASE("a CPU added back with its old original keeps its record for the next hold") {
    QosTree tree(2);
    Log log;
    PerCpuHolder holder(tree.sysroot(), tree.journal(), log.sink());
    holder.apply({{1, us(20)}}, t0);
    REQUIRE(tree.get(1) == "20");
    replug(tree, 1);
    int records = 0;
    holder.on_step = [&](std::string_view step) { records += step == "record"; };
    holder.apply({{1, us(20)}}, t0);
    CHECK(tree.get(1) == "20");
    CHECK(holder.yielded().empty());
    // The record already names the file's original and 20: it is marked
    // released (the old device's limit went with it), then held again.
    CHECK(records == 2);
    REQUIRE(journal_of(tree).size() == 1);
    CHECK(journal_of(tree)[0].original == LatencyLimit{});
    CHECK_FALSE(journal_of(tree)[0].released);

    // Killed now: the restore puts the original back on the new device.
    REQUIRE(restore_journal(tree.sysroot(), tree.journal(), log.sink()));
    CHECK(tree.get(1) == "0");
}

TEST_CASE("0 written on the same device by someone else is theirs while latgov wants the CPU") {
    // Not a new device: the same file, changed by another writer (tuned
    // putting back its "0" as it stops, say).
    QosTree tree(2, "500\n");
    Log log;
    PerCpuHolder holder(tree.sysroot(), tree.journal(), log.sink());
    holder.apply({{1, us(20)}}, t0);
    REQUIRE(tree.get(1) == "20");
    tree.set(1, "0\n");

    SUBCASE("seen by a hold: not fought until latgov no longer wants the CPU") {
        holder.apply({{1, us(20)}}, t0);
        CHECK(log.mentions("cpu 1: pm_qos_resume_latency_us"));
        REQUIRE(holder.yielded().count(1) == 1);
        CHECK(holder.yielded().at(1) == LatencyLimit{});
        CHECK(holder.held().empty());
        holder.apply({{1, us(20)}}, t0); // the same hold goes on
        holder.prepare({{1, us(20)}});
        CHECK(tree.get(1) == "0\n");
        CHECK(journal_of(tree).empty());
        holder.apply({}, t0); // it ends
    }
    SUBCASE("seen by a release") {
        holder.apply({}, t0);
        CHECK(log.mentions("cpu 1: pm_qos_resume_latency_us"));
    }
    CHECK(log.mentions("by someone else"));
    CHECK_FALSE(log.mentions("removed and added back"));
    CHECK(holder.yielded().empty());
    CHECK(holder.held().empty());
    CHECK(tree.get(1) == "0\n");

    // No limit is nobody's: the next hold takes the CPU as at any start,
    // and puts back the 0 it found.
    holder.apply({{1, us(20)}}, t0);
    CHECK(tree.get(1) == "20");
    REQUIRE(journal_of(tree).size() == 1);
    CHECK(journal_of(tree)[0].original == LatencyLimit{});
    CHECK(holder.release_all());
    CHECK(tree.get(1) == "0");
}

TEST_CASE("a failed restore names the CPUs it could not put back, and only what failed") {
    QosTree tree(1);
    tree.set(0, "20\n");
    // CPUs 9, 10 and 12 are there, their files cannot be read (for now).
    for (int cpu : {12, 9, 10})
        fs::create_directories(tree.slot(cpu).parent_path());
    const std::vector<JournalEntry> entries{{0, LatencyLimit{}, us(20)},
                                            {12, us(300), us(0)},
                                            {9, us(300), us(0)},
                                            {10, us(300), us(0)}};
    Log log;
    SUBCASE("CPUs only") {
        REQUIRE(write_journal(tree.journal(), entries));
        auto restored = restore_journal(tree.sysroot(), tree.journal(), log.sink());
        REQUIRE_FALSE(restored);
        CHECK(restored.error().message ==
              "Failed to restore cpus 9-10,12, kept in " + tree.journal().string());
    }
    SUBCASE("one CPU and a line") {
        REQUIRE(write_journal(tree.journal(), {entries[0], entries[2]}, {"cpu 3 original"}));
        auto restored = restore_journal(tree.sysroot(), tree.journal(), log.sink());
        REQUIRE_FALSE(restored);
        CHECK(restored.error().message.starts_with("Failed to restore cpu 9 and to parse 1 line, "
                                                   "kept in " +
                                                   tree.journal().string() + " (line "));
    }
    SUBCASE("lines only") {
        REQUIRE(write_journal(tree.journal(), {entries[0]}, {"cpu 3 original", "cpu 4"}));
        auto restored = restore_journal(tree.sysroot(), tree.journal(), log.sink());
        REQUIRE_FALSE(restored);
        CHECK(restored.error().message.starts_with("Failed to parse 2 lines, kept in "));
    }
    CHECK(tree.get(0) == "0");
}

TEST_CASE("a journal of more than 4096 CPUs is read, restored and taken over") {
    // One padded record per CPU: 4100 of them pass 1 MiB, the cap of
    // latgov's other state files.
    constexpr int cpus = 4100;
    QosTree tree(cpus, "20\n");
    std::string text(journal_header);
    text.insert(text.size() - 1, journal_record_size - text.size(), ' ');
    for (int cpu = 0; cpu < cpus; ++cpu)
        text += padded_record(format_journal_entry({cpu, us(300), us(20)}));
    REQUIRE(text.size() > (size_t{1} << 20));
    REQUIRE(text.size() <= max_journal_bytes);
    std::ofstream(tree.journal()) << text;
    REQUIRE(journal_of(tree).size() == cpus);

    Log log;
    REQUIRE(restore_journal(tree.sysroot(), tree.journal(), log.sink()));
    CHECK(tree.get(0) == "300");
    CHECK(tree.get(cpus - 1) == "300");
    CHECK_FALSE(fs::exists(tree.journal()));

    // Killed again, and this time a holder takes the journal over (the
    // same tree: thousands of CPU directories take seconds to make).
    for (int cpu = 0; cpu < cpus; ++cpu)
        tree.set(cpu, "20\n");
    std::ofstream(tree.journal()) << text;
    PerCpuHolder holder(tree.sysroot(), tree.journal(), log.sink());
    holder.apply({}, t0);
    CHECK_FALSE(log.mentions("not taken over"));
    CHECK(holder.release_all());
    CHECK(tree.get(0) == "300");
    CHECK(tree.get(cpus - 1) == "300");
    CHECK_FALSE(fs::exists(tree.journal()));

    // Past the cap it is still refused, not read whole.
    std::ofstream(tree.journal()) << std::string(max_journal_bytes + 1, ' ');
    auto read = read_journal(tree.journal());
    REQUIRE_FALSE(read);
    CHECK(read.error().message.find("larger than " + std::to_string(max_journal_bytes)) !=
          std::string::npos);
}

TEST_CASE("a journal record that cannot be cleared is logged with its CPU, and stays") {
    QosTree tree(2);
    Log log;
    PerCpuHolder holder(tree.sysroot(), tree.journal(), log.sink());
    holder.apply({{1, us(20)}}, t0);
    REQUIRE(tree.get(1) == "20");
    tree.set(1, "100\n"); // someone else's: the record is to be cleared
    {
        // Below the record's offset: its pwrite fails with EFBIG.
        FileSizeLimit limit(1);
        REQUIRE(limit.ok());
        holder.apply({{1, us(20)}}, t0);
    }
    CHECK(tree.get(1) == "100\n");
    CHECK(log.mentions("cpu 1: failed to clear its journal record (Failed to write " +
                       tree.journal().string() + ": File too large); the record stays"));
    REQUIRE(journal_of(tree).size() == 1);
    CHECK(journal_of(tree)[0].cpu == 1);
}

namespace {

// Runs `body` where opening a file of mode 0444 read-write is refused:
// here when not root, else in a child that drops to nobody (root opens it
// whatever its mode). What `body` returns comes back through a pipe.
std::string where_read_only_is_refused(const std::function<std::string()>& body) {
    if (::geteuid() != 0)
        return body();
    int fds[2];
    REQUIRE(::pipe(fds) == 0);
    const pid_t child = ::fork();
    REQUIRE(child >= 0);
    if (child == 0) {
        ::close(fds[0]);
        std::string out = "could not drop to uid 65534";
        if (::setresgid(65534, 65534, 65534) == 0 && ::setresuid(65534, 65534, 65534) == 0)
            out = body();
        (void)!::write(fds[1], out.data(), out.size());
        ::_exit(0);
    }
    ::close(fds[1]);
    std::string out;
    char buf[4096];
    for (ssize_t n; (n = ::read(fds[0], buf, sizeof buf)) > 0;)
        out.append(buf, static_cast<size_t>(n));
    ::close(fds[0]);
    REQUIRE(::waitpid(child, nullptr, 0) == child);
    return out;
}

} // namespace

TEST_CASE("a write to a file open only for reading names why it could not be opened to write") {
    // The read-write open is refused (EACCES here; EROFS on a read-only
    // sysfs), the read-only one is not: reads work, and a write must say
    // what refused it, not EBADF from writing through the read-only one.
    QosTree tree(2, "20\n");
    fs::permissions(tree.root(), fs::perms::owner_all | fs::perms::group_read |
                                     fs::perms::group_exec | fs::perms::others_read |
                                     fs::perms::others_exec);
    REQUIRE(::chmod(tree.slot(1).c_str(), 0444) == 0);
    SUBCASE("ResumeLatencyFile") {
        const std::string out = where_read_only_is_refused([&] {
            ResumeLatencyFile file(tree.sysroot(), 1);
            auto read = file.read();
            if (!read || *read != us(20))
                return std::string("read failed");
            auto written = file.write(us(300));
            return written ? std::string("written") : written.error().message;
        });
        CHECK(out == "Failed to write 300 to " + tree.slot(1).string() + ": Permission denied");
    }
    SUBCASE("restore_journal") {
        REQUIRE(write_journal(tree.journal(), {{1, us(300), us(20)}}));
        REQUIRE(::chmod(tree.journal().parent_path().c_str(), 0777) == 0);
        REQUIRE(::chmod(tree.journal().c_str(), 0666) == 0);
        const std::string out = where_read_only_is_refused([&] {
            Log log;
            auto restored = restore_journal(tree.sysroot(), tree.journal(), log.sink());
            std::string lines;
            for (const auto& line : log.lines)
                lines += line + "\n";
            return lines + (restored ? "restored" : restored.error().message);
        });
        CHECK(out == "Failed to write 300 to " + tree.slot(1).string() +
                         ": Permission denied\nFailed to restore cpu 1, kept in " +
                         tree.journal().string());
    }
    CHECK(tree.get(1) == "20\n");
}

TEST_CASE("restore_journal of a malformed journal is an error and keeps the journal") {
    QosTree tree(1);
    tree.set(0, "20\n");
    std::ofstream(tree.journal()) << "cpu 0 original 0 written\n";
    Log log;
    auto restored = restore_journal(tree.sysroot(), tree.journal(), log.sink());
    REQUIRE_FALSE(restored);
    CHECK(restored.error().message.find("line 1") != std::string::npos);
    CHECK(tree.get(0) == "20\n");
    CHECK(fs::exists(tree.journal()));
}

namespace {

// True if this process has an open descriptor on `path`.
bool process_has_open(const fs::path& path) {
    for (const auto& fd : fs::directory_iterator("/proc/self/fd")) {
        std::error_code ec;
        if (fs::read_symlink(fd.path(), ec) == path)
            return true;
    }
    return false;
}

std::vector<std::int32_t> s32_writes(const fs::path& path) {
    const std::string bytes = test::slurp(path);
    REQUIRE(bytes.size() % 4 == 0);
    std::vector<std::int32_t> values(bytes.size() / 4);
    std::memcpy(values.data(), bytes.data(), bytes.size());
    return values;
}

} // namespace

TEST_CASE("GlobalHolder writes a 4-byte binary s32 and closes on release") {
    QosTree tree(1);
    const auto dev = tree.root() / "dev/cpu_dma_latency";
    fs::create_directories(dev.parent_path());
    std::ofstream(dev).flush();
    Log log;
    GlobalHolder global(tree.sysroot(), log.sink());

    global.apply(us(20), t0);
    CHECK(global.holding());
    CHECK(global.held() == us(20));
    CHECK(process_has_open(dev));
    CHECK(s32_writes(dev) == std::vector<std::int32_t>{20});

    global.apply(us(20), t0); // unchanged: no second write
    CHECK(s32_writes(dev) == std::vector<std::int32_t>{20});

    global.apply(us(0), t0); // new value on the same request
    CHECK(s32_writes(dev) == std::vector<std::int32_t>{20, 0});

    global.apply(us(4000000000U), t0); // beyond s32: "no constraint", not negative
    CHECK(s32_writes(dev) == std::vector<std::int32_t>{20, 0, 2000000000});

    global.apply(LatencyLimit{}, t0);
    CHECK_FALSE(global.holding());
    CHECK_FALSE(process_has_open(dev));
    CHECK(log.lines.empty());
}

TEST_CASE("GlobalHolder without the device logs and holds nothing") {
    QosTree tree(1);
    Log log;
    GlobalHolder global(tree.sysroot(), log.sink());
    global.apply(us(20), t0);
    CHECK_FALSE(global.holding());
    CHECK(log.mentions("Failed to open"));
    CHECK(log.mentions("cpu_dma_latency"));
}
