// The runtime directory (/run/latgov) and the files latgov writes as root:
// everything is opened relative to a directory fd with O_NOFOLLOW, so a
// symlink planted by someone else is refused, never followed, and a
// directory that anyone but its owner can write is refused outright.
#pragma once

#include "latgov/fd.hpp"
#include "latgov/result.hpp"

#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <sys/types.h>
#include <vector>

namespace latgov {

class SysRoot;

// Files latgov reads back are small; a cap keeps a link to /dev/zero or a
// huge planted file from exhausting memory.
constexpr size_t max_state_file_bytes = 1 << 20;

// Others may read its files by name (status.json) but not list it: open
// for reading, they could flock it.
constexpr mode_t runtime_dir_mode = 0711;

class RuntimeDir {
  public:
    // Opens `path`, creating it (and missing parents) mode runtime_dir_mode
    // when `create`; one that group or others may read is narrowed to that
    // (others cannot open it to take its lock). Refuses a symlink, a
    // non-directory, a directory owned by another user, or one that group
    // or others may write: any of those lets a local user plant files that
    // root would act on. Refuses it too where a lookup of `path` searches a
    // directory that a user other than root or this one owns, or that group
    // or others may write without the sticky bit: such a user could rename
    // it away and put another in its place, which the next latgov process
    // to look it up would use (a restore writes back as root the values of
    // the journal it finds there). Once open, its files are reached through
    // the descriptor, never by path again.
    static Result<RuntimeDir> open(const std::filesystem::path& path, bool create);

    // An exclusive, non-blocking flock on the directory: one writer of PM
    // QoS at a time (latgovd, `latgovd --restore`, `latgov calibrate`). The
    // kernel drops it when the process dies, so a crash leaves no stale lock.
    Result<void> lock();
    // lock() that tells a lock someone else holds (false) from a failure.
    Result<bool> try_lock();
    // Why lock() failed while someone else holds it, naming the holder.
    std::string busy_message() const;
    // open(), then lock(), for callers that say nothing more of either.
    static Result<RuntimeDir> open_locked(const std::filesystem::path& path, bool create);
    // Makes try_lock() and lock() also take an exclusive flock on
    // <root>/dev/cpu_dma_latency, after the runtime directory's: writers
    // with different runtime directories (so different journals) would
    // otherwise write the same PM QoS files. That node, not the CPUs' sysfs
    // directory: only root may open it (anyone may open a sysfs directory,
    // and so hold its lock), and it is the same inode in a service whose
    // PrivateNetwork= gives it a sysfs instance of its own (whose inodes,
    // and flocks, are not the host's). Opening it adds a PM QoS request at
    // the default, which constrains nothing. Where the node is missing or
    // denied (a private /dev, a device cgroup), the lock is on
    // <root>/sys/devices/system/cpu instead, which keeps such a writer apart
    // only from others that lock it too. When that lock is busy, neither is
    // held. A tree with neither has nothing to guard.
    Result<void> guard_cpus(const SysRoot& root);

    const std::filesystem::path& path() const { return path_; }
    int fd() const { return fd_.get(); }
    // The mode open() found when it took the read bits of group and others
    // away; nullopt when it left the mode as it was.
    std::optional<mode_t> narrowed_from() const { return narrowed_from_; }
    // That, as a line for the log; "" when nothing was narrowed.
    std::string narrowed_message() const;

    // nullopt when the file does not exist.
    Result<std::optional<std::string>> read(std::string_view name,
                                            size_t max_bytes = max_state_file_bytes) const;
    // A unique temporary file (O_EXCL|O_NOFOLLOW), then rename over `name`:
    // readers see the old or the new file, never a part.
    Result<void> write_atomic(std::string_view name, std::string_view text, mode_t mode) const;
    // Missing is fine.
    Result<void> remove(std::string_view name) const;

  private:
    RuntimeDir(std::filesystem::path path, Fd fd) : path_(std::move(path)), fd_(std::move(fd)) {}
    std::filesystem::path path_;
    Fd fd_;
    std::optional<mode_t> narrowed_from_;
    std::string cpus_path_; // guard_cpus()
    Fd cpus_fd_;
    bool cpus_busy_ = false; // the last try_lock() found the CPUs' lock taken
};

// Whether a process holds the lock (RuntimeDir::lock) of the runtime
// directory at `path`, as every latgovd does for its whole life; from
// /proc/locks, without taking the lock, which would make a latgovd that
// starts meanwhile refuse to. nullopt when that cannot be told (no such
// directory, /proc/locks unreadable).
std::optional<bool> runtime_dir_locked(const std::filesystem::path& path);
// The processes that hold it, as /proc/locks names them: pids of this
// process's pid namespace, 0 for one outside it.
std::optional<std::vector<long>> runtime_dir_lock_holders(const std::filesystem::path& path);

// What a replaced file must survive. The runtime files (journal, status,
// metrics) guard against the daemon's death, not the machine's (PM QoS
// values do not survive a reboot either), and a flush would be IO on the
// disks latgov watches. What latgov learnt (calibration, evidence) is
// written rarely and would cost a new measurement if a power loss left it
// empty: it is flushed before the rename, and the directory after it.
enum class Durability { process_crash, power_loss };

// Relative to an open directory: the same operations for any directory
// (the calibration file's).
Result<std::optional<std::string>> read_file_at(int dir_fd, const std::string& shown_dir,
                                                std::string_view name, size_t max_bytes);
Result<void> write_file_atomic_at(int dir_fd, const std::string& shown_dir, std::string_view name,
                                  std::string_view text, mode_t mode,
                                  Durability durability = Durability::process_crash);

// The name of the next temporary write_file_atomic_at creates for `name`
// in this process: ".<name>.<pid>.<n>.tmp", n counting every call.
std::string next_temporary_name(std::string_view name);

// Whose temporaries a cleanup removes: those of processes that no longer
// run; or this process's too, which only a process that has not written yet
// may ask for (latgovd at start-up, before its threads): a killed process
// that had the same pid (the kernel gave it again, as in a container where
// latgovd always has the same one) left them.
enum class TemporariesOf { dead_processes, dead_processes_and_this_one };

// The temporaries of `name` that write_file_atomic_at left in the directory
// (".<name>.<pid>.<n>.tmp") when their writer was killed between creating
// and renaming them: those of `whose` are removed. How many were; a
// directory that cannot be read has none.
std::size_t remove_dead_temporaries_at(int dir_fd, std::string_view name,
                                       TemporariesOf whose = TemporariesOf::dead_processes);
std::size_t remove_dead_temporaries(const std::filesystem::path& path,
                                    TemporariesOf whose = TemporariesOf::dead_processes);

// By path: opens the parent directory, then the file without following a
// symlink in its last component.
Result<std::optional<std::string>> read_file_nofollow(const std::filesystem::path& path,
                                                      size_t max_bytes = max_state_file_bytes);
Result<void> write_file_atomic(const std::filesystem::path& path, std::string_view text,
                               mode_t mode, Durability durability = Durability::process_crash);

} // namespace latgov
