// The journal of per-CPU PM QoS values latgov may have written: its text
// form, one fixed-size record per CPU, and the decision of what a restore
// puts back. Pure; the file itself is written by qos.hpp.
#pragma once

#include "latgov/parse.hpp"

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace latgov {

// What latgov may have written to a CPU and what was there before, kept on
// disk (under /run/latgov) before a write so that a later run, or `latgovd
// --restore`, puts back the original after a crash or kill. The file holds
// the original, `written` (what latgov writes, or is about to), or one of
// `earlier` (a value written before whose replacement may not have landed);
// anything else was set by someone else and is theirs.
//
// A record is kept while latgov does not hold its CPU (journaled ahead of a
// hold, or its original put back), so that the next hold writes only the
// CPU file. Such a record is `released`: the file held the original when it
// was written, and whatever is there now, `written` included, was set by
// someone else since. A hold marks the record held again before it writes
// the CPU file, and a release marks it released once the original is back.
struct JournalEntry {
    int cpu = 0;
    LatencyLimit original;
    LatencyLimit written;
    std::vector<LatencyLimit> earlier{};
    bool released = false;
    bool latgov_may_have_written(LatencyLimit value) const;
};

// Where a journal's records belong, named in its header: the boot that
// wrote it and the root whose CPUs it records ("/", or a tree given with
// --sysroot, as an absolute path). Either is empty when unknown.
struct JournalOrigin {
    std::string boot_id{};
    std::string root{};
};

// A journal as read: one bad line (a torn or hand-edited file) costs only
// that line, which is kept verbatim and reported.
struct JournalText {
    std::string boot_id; // of the boot that wrote it; empty when it names none
    std::string root;    // whose CPUs it records; empty when it names none
    std::vector<JournalEntry> entries;
    std::vector<std::string> bad_lines; // verbatim
    std::vector<std::string> errors;    // "line 3: expected ..., got ..."
};

// Pure: journal text <-> entries ("cpu 3 original 0 written n/a earlier 20",
// "cpu 3 original 0 written n/a released"). A record without "released" is
// held: so are those of a latgov that did not write the word.
std::string format_journal_entry(const JournalEntry& entry);
std::string format_journal(const std::vector<JournalEntry>& entries,
                           const std::vector<std::string>& kept_lines = {},
                           const JournalOrigin& origin = {});
JournalText parse_journal(std::string_view text);

constexpr std::string_view journal_header =
    "# latgov journal: per-CPU pm_qos_resume_latency_us to restore\n";
// The header's second line, when the boot is known: "# boot <boot_id>"
// (/proc/sys/kernel/random/boot_id). A comment to anything that reads only
// records. What a journal of an earlier boot records went with that boot: a
// runtime directory not on tmpfs keeps it across a reboot, and putting its
// originals back would overwrite values set since.
constexpr std::string_view journal_boot_prefix = "# boot ";
// The header's next line, when the root is known: "# root <path>", each
// byte of the path that is not printable ASCII, a space or '%' as "%XX". Records
// of a captured tree are not this machine's, nor the other way round: a
// journal is put back, or taken over, only under the root it names.
constexpr std::string_view journal_root_prefix = "# root ";
// The header with those lines, each when its part of `origin` is not empty.
std::string journal_header_for(const JournalOrigin& origin);
// One record per CPU, padded with spaces to this size: a power of two that
// divides a page, so a record's pwrite never straddles two pages.
constexpr size_t journal_record_size = 256;
constexpr size_t journal_max_earlier = 8;

// `line` padded with spaces to journal_record_size, newline last.
std::string padded_record(const std::string& line);

// What a restore does with a CPU whose file holds `current`. A released
// record's CPU is left as it is.
enum class RestoreAction {
    none,           // the file holds the original already
    write_original, // latgov may have written `current`: put the original back
    leave_theirs,   // someone else set `current`: it stays
};
RestoreAction restore_action(const JournalEntry& entry, LatencyLimit current);

// True if `a` is at least as strict as `b` (a smaller limit; nullopt = none).
bool at_least_as_strict(LatencyLimit a, LatencyLimit b);
// True if `a` is strictly stricter than `b`: a write of `a` over `b`
// tightens.
bool stricter(LatencyLimit a, LatencyLimit b);

} // namespace latgov
