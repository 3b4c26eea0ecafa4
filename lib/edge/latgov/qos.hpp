// The edge where latgov changes the machine: per-CPU resume latency slots
// (with a crash-safe journal of their original values) and the global
// /dev/cpu_dma_latency request.
#pragma once

#include "latgov/fd.hpp"
#include "latgov/parse.hpp"
#include "latgov/result.hpp"
#include "latgov/sysroot.hpp"

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <string>
#include <vector>

namespace latgov {

using SteadyTime = std::chrono::steady_clock::time_point;

// One CPU's pm_qos_resume_latency_us, the single user-space slot per CPU.
class ResumeLatencyFile {
  public:
    ResumeLatencyFile(const SysRoot& root, int cpu);
    Result<LatencyLimit> read() const;
    Result<void> write(LatencyLimit limit) const;
    const std::string& path() const { return path_; }

  private:
    std::string path_;
};

// What latgov wrote to a CPU and what was there before, kept on disk (under
// /run/latgov) before the first write so that a later run, or `latgovd
// --restore`, puts back the original after a crash or kill.
struct JournalEntry {
    int cpu = 0;
    LatencyLimit original;
    LatencyLimit written;
};

Result<std::vector<JournalEntry>> read_journal(const std::filesystem::path& path);
Result<void> write_journal(const std::filesystem::path& path,
                           const std::vector<JournalEntry>& entries);
// Pure: journal text <-> entries ("cpu 3 original 0 written n/a" per line).
std::string format_journal(const std::vector<JournalEntry>& entries);
Result<std::vector<JournalEntry>> parse_journal(std::string_view text);

// One-line messages for the log ("cpu 1: ..."), so this layer needs no logger.
using LogSink = std::function<void(const std::string&)>;

// Puts back every value a journal recorded, unless someone changed the CPU
// since latgov wrote it (then theirs stays). Removes the journal when done;
// entries that could not be read or written stay in it, and are an error.
Result<void> restore_journal(const SysRoot& root, const std::filesystem::path& journal,
                             const LogSink& log);

// Holds per-CPU limits: writes only changes, never weakens a stricter value
// that someone else set, and yields to anyone who changes a held CPU (their
// value is then left alone until it changes again, and becomes the original).
class PerCpuHolder {
  public:
    PerCpuHolder(const SysRoot& root, std::filesystem::path journal, LogSink log);

    // Brings every CPU to `wanted` (CPUs absent from it are released).
    void apply(const std::map<int, LatencyLimit>& wanted, SteadyTime now);
    void release_all();

    struct Held {
        LatencyLimit original;
        LatencyLimit written;
        SteadyTime since;
    };
    const std::map<int, Held>& held() const { return held_; }
    // CPUs another writer changed while latgov held them, with their value.
    const std::map<int, LatencyLimit>& yielded() const { return yielded_; }

  private:
    bool hold(int cpu, LatencyLimit want, SteadyTime now);
    void release(int cpu);
    bool save_journal();

    SysRoot root_; // by value, so a temporary root cannot dangle
    std::filesystem::path journal_;
    LogSink log_;
    std::map<int, Held> held_;
    // CPUs someone else wrote while latgov held them, with the value they wrote.
    std::map<int, LatencyLimit> yielded_;
};

// The global request: an open /dev/cpu_dma_latency holds it, close drops it
// (also when the process dies, so no journal is needed).
class GlobalHolder {
  public:
    GlobalHolder(const SysRoot& root, LogSink log);
    // nullopt releases the request.
    void apply(LatencyLimit wanted, SteadyTime now);
    LatencyLimit held() const { return held_; }
    bool holding() const { return static_cast<bool>(fd_); }
    SteadyTime since() const { return since_; }

  private:
    SysRoot root_;
    LogSink log_;
    Fd fd_;
    LatencyLimit held_;
    SteadyTime since_{};
};

// True if `a` is at least as strict as `b` (a smaller limit; nullopt = none).
bool at_least_as_strict(LatencyLimit a, LatencyLimit b);

} // namespace latgov
