// The journal's text and the restore decision (pure).
#include "latgov/journal.hpp"

#include <cstdint>
#include <doctest/doctest.h>
#include <string>
#include <vector>

using namespace latgov;

namespace {

LatencyLimit us(std::uint32_t n) {
    return LatencyLimit{n};
}

} // namespace

TEST_CASE("journal text round-trips every kind of limit") {
    const std::vector<JournalEntry> entries{
        {0, LatencyLimit{}, us(20)}, {3, us(100), us(0)}, {17, us(0), us(0)}};
    const auto text = format_journal(entries);
    CHECK(text.find("cpu 3 original 100 written n/a\n") != std::string::npos);
    CHECK(text.find("cpu 0 original 0 written 20\n") != std::string::npos);
    auto parsed = parse_journal(text).entries;
    REQUIRE(parsed.size() == 3);
    for (size_t i = 0; i < entries.size(); ++i) {
        CHECK(parsed[i].cpu == entries[i].cpu);
        CHECK(parsed[i].original == entries[i].original);
        CHECK(parsed[i].written == entries[i].written);
    }
}

TEST_CASE("journal comments and blank lines are skipped") {
    auto parsed = parse_journal("# header\n\n   \n  # indented comment\ncpu 2 original 0 "
                                "written 5\n")
                      .entries;
    REQUIRE(parsed.size() == 1);
    CHECK(parsed[0].cpu == 2);
    CHECK(parsed[0].written == us(5));
}

TEST_CASE("a journal names the boot that wrote it in its header, and one that names none reads") {
    const std::vector<JournalEntry> entries{{1, LatencyLimit{}, LatencyLimit{20}}};
    const auto text =
        format_journal(entries, {}, {.boot_id = "3f1e9c2a-0b6d-4c7e-9a41-5d2f8e6b7c10"});
    CHECK(text.starts_with(std::string(journal_header) +
                           "# boot 3f1e9c2a-0b6d-4c7e-9a41-5d2f8e6b7c10\n"));
    const auto parsed = parse_journal(text);
    CHECK(parsed.boot_id == "3f1e9c2a-0b6d-4c7e-9a41-5d2f8e6b7c10");
    REQUIRE(parsed.entries.size() == 1);
    CHECK(parsed.errors.empty());
    // Padded as a record's rest is, and an older latgov's header alone.
    CHECK(parse_journal(std::string(journal_header) + "# boot abc      \n").boot_id == "abc");
    CHECK(parse_journal(format_journal(entries)).boot_id.empty());
}

TEST_CASE("a journal names the root whose CPUs it records, after the boot") {
    const std::vector<JournalEntry> entries{{1, LatencyLimit{}, LatencyLimit{20}}};
    const auto text = format_journal(entries, {}, {.boot_id = "abc", .root = "/var/tmp/tree"});
    CHECK(text.starts_with(std::string(journal_header) + "# boot abc\n# root /var/tmp/tree\n"));
    const auto parsed = parse_journal(text);
    CHECK(parsed.boot_id == "abc");
    CHECK(parsed.root == "/var/tmp/tree");
    REQUIRE(parsed.entries.size() == 1);
    CHECK(parsed.errors.empty());
    // Padded to a record as the header is, the first root line wins, and
    // an older latgov's journal names none.
    CHECK(parse_journal(std::string(journal_header) + "# root /     \n# root /x\n").root == "/");
    CHECK(parse_journal(format_journal(entries, {}, {.boot_id = "abc"})).root.empty());
    // A path may hold any byte but NUL: spaces (a trailing one too, which
    // the record padding would swallow), newlines and '%' are escaped.
    const std::string odd = "/var/tmp/a tree \n%41\x7f ";
    const auto escaped = format_journal(entries, {}, {.root = odd});
    CHECK(escaped.find("# root /var/tmp/a%20tree%20%0A%2541%7F%20\n") != std::string::npos);
    CHECK(parse_journal(escaped).root == odd);
    CHECK(parse_journal(std::string(journal_header) + "# root /a%20b%20      \n").root == "/a b ");
    // An escape that is not one is taken as written: a root nobody has.
    CHECK(parse_journal("# root /a%4/b%zz%\n").root == "/a%4/b%zz%");
}

TEST_CASE("a malformed journal line is reported by number and costs only that line") {
    const std::string good = "# latgov journal\ncpu 0 original 0 written 20\n";
    const char* bad_lines[] = {
        "cpu x original 0 written 20",
        "cpu -1 original 0 written 20",
        "cpu 1 original 0",
        "cpu 1 original 0 written",
        "cpu 1 original -5 written 20",
        "cpu 1 original 0 written 20us",
        "cpu 1 origin 0 written 20",
        "core 1 original 0 written 20",
        "cpu 1 original 0 written 20 extra",
        "cpu 99999999999 original 0 written 20",
    };
    for (const char* bad : bad_lines) {
        CAPTURE(bad);
        auto parsed = parse_journal(good + bad + "\n");
        REQUIRE(parsed.entries.size() == 1);
        CHECK(parsed.entries[0].written == us(20));
        REQUIRE(parsed.bad_lines.size() == 1);
        CHECK(parsed.bad_lines[0] == bad);
        REQUIRE(parsed.errors.size() == 1);
        CHECK(parsed.errors[0].find("line 3") != std::string::npos);
        CHECK(parsed.errors[0].find(bad) != std::string::npos);
    }
}

TEST_CASE("a journal record is padded to its fixed size and still parses") {
    const JournalEntry entry{5, us(100), us(0), {us(20)}};
    const auto record = padded_record(format_journal_entry(entry));
    CHECK(record.size() == journal_record_size);
    CHECK(record.back() == '\n');
    auto parsed = parse_journal(std::string(journal_header) + record).entries;
    REQUIRE(parsed.size() == 1);
    CHECK(parsed[0].cpu == 5);
    CHECK(parsed[0].original == us(100));
    CHECK(parsed[0].written == us(0));
    CHECK(parsed[0].earlier == std::vector<LatencyLimit>{us(20)});
}

TEST_CASE("restore writes the original back only over a value the record names") {
    const JournalEntry entry{1, us(100), us(0), {us(20)}};
    CHECK(restore_action(entry, us(100)) == RestoreAction::none);
    CHECK(restore_action(entry, us(0)) == RestoreAction::write_original);
    CHECK(restore_action(entry, us(20)) == RestoreAction::write_original);
    CHECK(restore_action(entry, us(7)) == RestoreAction::leave_theirs);
    CHECK(restore_action(entry, LatencyLimit{}) == RestoreAction::leave_theirs);
    const JournalEntry none_original{2, LatencyLimit{}, us(0)};
    CHECK(restore_action(none_original, LatencyLimit{}) == RestoreAction::none);
    CHECK(restore_action(none_original, us(0)) == RestoreAction::write_original);
}

TEST_CASE("a released record says so last, and a restore leaves its CPU as it is") {
    JournalEntry entry{4, us(100), us(0), {}, true};
    CHECK(format_journal_entry(entry) == "cpu 4 original 100 written n/a released");
    entry.earlier = {us(20)};
    const auto parsed = parse_journal(padded_record(format_journal_entry(entry)));
    REQUIRE(parsed.entries.size() == 1);
    CHECK(parsed.entries[0].released);
    CHECK(parsed.entries[0].earlier == std::vector<LatencyLimit>{us(20)});
    CHECK_FALSE(parse_journal("cpu 4 original 100 written n/a\n").entries.at(0).released);
    for (const auto* bad : {"cpu 4 original 100 written n/a released released",
                            "cpu 4 original 100 written n/a earlier released",
                            "cpu 4 released original 100 written n/a"})
        CHECK(parse_journal(bad).bad_lines.size() == 1);

    CHECK(restore_action(entry, us(100)) == RestoreAction::none);
    CHECK(restore_action(entry, us(0)) == RestoreAction::leave_theirs);
    CHECK(restore_action(entry, us(20)) == RestoreAction::leave_theirs);
}

TEST_CASE("a limit is stricter than another only if smaller, and any limit than none") {
    CHECK(stricter(us(5), us(10)));
    CHECK(stricter(us(0), std::nullopt));
    CHECK_FALSE(stricter(us(10), us(5)));
    CHECK_FALSE(stricter(us(5), us(5)));
    CHECK_FALSE(stricter(std::nullopt, us(5)));
    CHECK_FALSE(stricter(std::nullopt, std::nullopt));
    // At least as strict, by contrast, holds for equal limits.
    CHECK(at_least_as_strict(us(5), us(5)));
    CHECK(at_least_as_strict(std::nullopt, std::nullopt));
}
