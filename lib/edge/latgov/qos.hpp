// The edge where latgov changes the machine: per-CPU resume latency slots
// (with a crash-safe journal of their original values) and the global
// /dev/cpu_dma_latency request.
#pragma once

#include "latgov/clock.hpp"
#include "latgov/fd.hpp"
#include "latgov/journal.hpp"
#include "latgov/parse.hpp"
#include "latgov/result.hpp"
#include "latgov/sysroot.hpp"

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <sys/types.h>
#include <utility>
#include <vector>

namespace latgov {

class RuntimeDir;

// One CPU's pm_qos_resume_latency_us, the single user-space slot per CPU.
// The file stays open and is re-read and rewritten in place: the onset of a
// hold is one pread and one pwrite, no open.
class ResumeLatencyFile {
  public:
    ResumeLatencyFile(const SysRoot& root, int cpu);
    Result<LatencyLimit> read();
    Result<void> write(LatencyLimit limit);
    // True once after a read that found a new file in place of the one
    // read before: the CPU's device was removed and added back, and the
    // value read is the new device's.
    bool take_replaced() { return std::exchange(replaced_, false); }

  private:
    // `writable`: a descriptor opened read-only (the read-write open was
    // refused) is not enough, and the refusal is the error.
    Result<void> open_once(bool writable = false);
    SysRoot root_;
    std::string abs_; // as on the live system
    std::string path_;
    Fd fd_;
    bool read_only_ = false; // fd_ was opened O_RDONLY: O_RDWR was refused
    bool truncate_ = false;  // a plain file (a test tree), not sysfs
    // The file opened last, to tell a new one from it.
    bool opened_before_ = false;
    dev_t dev_ = 0;
    ino_t ino_ = 0;
    bool gone_ = false; // the open file went away (ENODEV): the next one is new
    bool replaced_ = false;
};

// The journal's name in a runtime directory (latgovd's, or calibrate's).
inline constexpr std::string_view journal_file_name = "journal";

// The most CPUs a journal has records for: parse_cpu_list accepts CPUs
// 0..65535, and latgov holds only CPUs it parsed.
inline constexpr size_t journal_max_cpus = 65536;
// A journal's size cap: its header (padded to a record) and one record per
// CPU, 16 MiB. Other state files keep max_state_file_bytes: with one record
// per CPU, 4096 CPUs would already pass that.
inline constexpr size_t max_journal_bytes = journal_record_size * (1 + journal_max_cpus);

// Where a journal is: a name in a directory. Given the directory open (the
// runtime directory, checked and locked), every access is relative to that
// descriptor: nothing done to the path after the check (a directory renamed
// away, a symlink re-pointed) leads to another file. Given a path alone, the
// directory is looked up at each access. A symlink in the last component is
// never followed.
class JournalPlace {
  public:
    JournalPlace(std::filesystem::path path); // implicit: a path names a place
    // `path` is where the directory open as `dir_fd` (duplicated) was found,
    // for messages; the file is `path`'s last component in it.
    static Result<JournalPlace> in_directory(int dir_fd, std::filesystem::path path);

    const std::filesystem::path& path() const { return path_; }
    // nullopt when it does not exist; the size is capped at `max_bytes`.
    Result<std::optional<std::string>> read(size_t max_bytes) const;
    // Atomic: a unique temporary, then rename.
    Result<void> write_atomic(std::string_view text, mode_t mode) const;
    Result<Fd> open_read_write() const;
    // Whether it exists (a symlink counts); an error when that cannot be told.
    Result<bool> exists() const;
    // Missing is fine.
    Result<void> remove() const;

  private:
    int dir() const;
    std::string relative() const;
    std::filesystem::path path_;
    std::shared_ptr<const Fd> dir_; // shared: a place is copied where it is passed on
};

// The journal (journal_file_name) of the runtime directory `dir`, reached
// through its open descriptor.
Result<JournalPlace> journal_in(const RuntimeDir& dir);

// A missing journal is an empty one; symlinks are refused, size is capped
// (max_journal_bytes).
Result<JournalText> read_journal(const JournalPlace& journal);
// Atomic (unique temporary + rename); no entry and no kept line removes it.
// `origin` (journal_origin_of) goes in the header.
Result<void> write_journal(const JournalPlace& journal, const std::vector<JournalEntry>& entries,
                           const std::vector<std::string>& kept_lines = {},
                           const JournalOrigin& origin = {});

// This boot's /proc/sys/kernel/random/boot_id under `root`; empty when it
// cannot be read (a tree given with --sysroot need not have it).
std::string boot_id_of(const SysRoot& root);
// The root as a journal names it: an absolute path without symlinks or
// "..", so that two spellings of one tree are one root.
std::string journal_root_of(const SysRoot& root);
// This boot's id and the root.
JournalOrigin journal_origin_of(const SysRoot& root);
// An error when the journal at `journal` (as read: `text`) records the CPUs
// of another root than `root`: nothing of it may be put back or taken over
// under this one. The error names both and the restore that puts it back.
// A journal that names no root (an older latgov's) is anyone's.
Result<void> check_journal_root(const JournalText& text, const SysRoot& root,
                                const std::filesystem::path& journal);

// One-line messages for the log ("cpu 1: ..."), so this layer needs no logger.
using LogSink = std::function<void(const std::string&)>;

// Puts back the original of every CPU whose value differs from it and is a
// value latgov may have written; a value someone else set stays. Removes the
// journal when done; entries that could not be put back and lines that could
// not be parsed stay in it, and are an error. A journal of an earlier boot
// (journal_boot_prefix) is removed, nothing of it put back; one of another
// root (check_journal_root) is an error, and kept as it is. The caller holds
// the runtime directory's lock.
Result<void> restore_journal(const SysRoot& root, const JournalPlace& journal, const LogSink& log);

// Holds per-CPU limits: writes only changes, never weakens a stricter value
// that someone else set, and yields to anyone who changes a held CPU (their
// value is then left alone until it changes again, and becomes the original).
//
// The journal has one fixed-size record per CPU, rewritten in place with one
// pwrite that never crosses a page (a kill cannot tear it). A record is
// written before the CPU file whenever the file could otherwise hold a value
// the record does not name, and is kept after release, marked released once
// the original is back: the next hold of the same limit (the next burst)
// then only marks it held (the same pwrite) before it writes the CPU file.
// A restore leaves the CPU of a released record as it is: what is there was
// set by someone else.
class PerCpuHolder {
  public:
    // With `take_over`, the first apply() or prepare() takes over the
    // records an earlier run left in `journal` (apply() retries putting them
    // back); while that fails (the journal cannot be read or rewritten),
    // nothing is held or journaled and each apply(), prepare() and
    // check_records() tries again. Without it (--dry-run, which writes
    // nothing) the journal is opened only by a first hold.
    PerCpuHolder(const SysRoot& root, JournalPlace journal, LogSink log, bool take_over = true);
    // The journal is from now on reached through `journal` (the same file,
    // its directory now open): called before anything is journaled.
    void use_journal_place(JournalPlace journal) { journal_ = std::move(journal); }

    // Brings every CPU to `wanted` (CPUs absent from it are released).
    void apply(const std::map<int, LatencyLimit>& wanted, TimePoint now);
    // Journals now what holding `likely` would write, released, so that a
    // later apply() of it only marks the records held before it writes the
    // CPU files (called before sleeping).
    // First it drops the records of CPUs someone else wrote since latgov
    // last put their original back (check_records()).
    void prepare(const std::map<int, LatencyLimit>& likely);
    // A record is kept while latgov does not hold its CPU (released, or
    // journaled ahead by prepare()), and names a value latgov may write.
    // It says released, so a restore leaves that value to whoever wrote
    // it; where marking it failed, a restore after a kill would put the
    // original back over it. So the CPUs latgov does not hold are read: the
    // record of one that no longer holds its original is dropped (the
    // value is theirs), and one not marked released yet is marked. The
    // originals a release could not put back are tried again first. Called
    // by the daemon's ticks every second
    // while they run that often (every housekeeping interval, 10 s, while
    // IO events wake an idle daemon); hold() checks the same at each onset.
    void check_records();
    // Puts back every original; removes the journal unless something could
    // not be put back or it has lines of an earlier run it cannot read.
    // False when an original could not be put back (logged; the journal
    // keeps it for a restore), or an earlier run's journal of this root was
    // never taken over (its CPUs may still be constrained).
    [[nodiscard]] bool release_all();

    struct Held {
        LatencyLimit original;
        LatencyLimit written;
        TimePoint since;
        // What the file held before the last write: the original, the value
        // written before it, or one a crashed run or a failed release left
        // (which may be stricter than `written`).
        LatencyLimit replaced;
        // writes() once `written` landed.
        std::uint64_t write = 0;
    };
    const std::map<int, Held>& held() const { return held_; }
    // How many writes of a limit have landed: a mark for tightened_since().
    std::uint64_t writes() const { return writes_; }
    // The CPUs written since writes() was `mark` with a limit stricter than
    // their files held: held anew or more strictly, a CPU added back and
    // held again included; not one whose write loosened a value a crashed
    // run left, nor one written with the value it held. In CPU order.
    std::vector<int> tightened_since(std::uint64_t mark) const;
    // CPUs another writer changed while latgov held them, with their value:
    // theirs until they change it again. A change to no limit ("0", the
    // kernel's default: a limit lifted, not one set) is theirs only while
    // latgov still wants the CPU; after that nobody holds anything there.
    const std::map<int, LatencyLimit>& yielded() const { return yielded_; }

    // Fault injection for tests: called at each step where a kill could
    // land ("record" before a journal record is written, "journaled",
    // "written", "released"); a throw from it abandons the holder
    // mid-operation, as a kill would.
    std::function<void(std::string_view step)> on_step;

  private:
    struct Record {
        JournalEntry entry;
        size_t slot = 0;
        // The file is known to hold the original. The record on disk says
        // so too (entry.released) once mark_released() could write it.
        bool restored = false;
    };
    // Reads a CPU's value; if its device was removed and added back since
    // the last read (`replugged`), first forgets what held on the old one.
    Result<LatencyLimit> read(int cpu, bool* replugged = nullptr);
    void forget_device(int cpu, LatencyLimit current);
    bool hold(int cpu, LatencyLimit want, TimePoint now);
    // Why holding `cpu` failed, logged the first time while it is wanted:
    // a failure that lasts (a full /run) is tried again every second, and
    // said once. hold_succeeded() says when it has passed.
    void hold_failed(int cpu, const std::string& why);
    void hold_succeeded(int cpu);
    bool adopt_journal(); // false while an earlier run's journal is not taken over
    bool earlier_journal_left() const;
    bool drop_if_theirs(int cpu, LatencyLimit current);
    void release(int cpu);
    void retry_restores();
    bool journal(const JournalEntry& entry, bool restored);
    // The CPU holds its original again: its record says latgov no longer
    // holds it, so that a restore after a kill leaves to whoever sets the
    // CPU from now on what they set, were it the value latgov wrote.
    void mark_released(int cpu, Record& record);
    bool forget(int cpu); // false if its record could not be cleared
    Result<void> open_journal();
    Result<void> write_slot(size_t slot, const std::string& line);
    ResumeLatencyFile& file(int cpu);
    void step(std::string_view name) const {
        if (on_step)
            on_step(name);
    }

    SysRoot root_; // by value, so a temporary root cannot dangle
    JournalPlace journal_;
    LogSink log_;
    JournalOrigin origin_; // this boot's and root's, written in the journal's header
    std::map<int, ResumeLatencyFile> files_;
    std::map<int, Held> held_;
    std::uint64_t writes_ = 0;
    std::map<int, Record> records_;
    std::vector<std::string> kept_lines_; // unparsable lines of an old journal
    // An earlier run's journal taken over, or known not to exist (or not to
    // be taken over: --dry-run). Until then nothing is held or journaled.
    bool adopted_ = false;
    std::string adopt_error_;    // why it is not yet, as last logged
    std::set<int> hold_failing_; // CPUs whose last hold failed (said once)
    Fd journal_fd_;
    size_t first_slot_offset_ = 0;
    size_t next_slot_ = 0;
    std::vector<size_t> free_slots_;
    // CPUs someone else wrote while latgov held them, with the value they wrote.
    std::map<int, LatencyLimit> yielded_;
};

// The global request: an open /dev/cpu_dma_latency holds it, close drops it
// (also when the process dies, so no journal is needed).
class GlobalHolder {
  public:
    GlobalHolder(const SysRoot& root, LogSink log);
    // nullopt releases the request.
    void apply(LatencyLimit wanted, TimePoint now);
    LatencyLimit held() const { return held_; }
    bool holding() const { return static_cast<bool>(fd_); }
    TimePoint since() const { return since_; }

  private:
    void failed(const std::string& why);

    SysRoot root_;
    LogSink log_;
    bool failing_ = false; // the last apply failed (said once)
    Fd fd_;
    LatencyLimit held_;
    TimePoint since_{};
};

} // namespace latgov
