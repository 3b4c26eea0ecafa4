// Every read of /sys, /proc and /dev goes through a SysRoot, so tests and
// `--sysroot` point the whole program at a captured tree.
//
// A tree under a root other than "/" is not trusted: every path resolves as
// if the root were "/" (chroot semantics), so an absolute symlink or a
// "../" chain in the tree stays inside it. Reads are capped by kind of file
// (read_cap()), so a file that never ends is an error, not a hang.
#pragma once

#include "latgov/fd.hpp"
#include "latgov/result.hpp"

#include <cstddef>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace latgov {

// What a capture keeps of one path: a file's bytes, a symlink's target or a
// directory.
struct CapturedEntry {
    enum class Kind { file, symlink, directory };
    Kind kind = Kind::file;
    std::string content; // file bytes, or symlink target
};

// Records every path a SysRoot touched, keyed by its absolute path (as seen
// from the root, e.g. "/sys/block/vda"), so `latgov snapshot` can store
// exactly what discovery read.
class CaptureLog {
  public:
    void add(std::string path, CapturedEntry entry);
    const std::map<std::string, CapturedEntry>& entries() const { return entries_; }

  private:
    std::map<std::string, CapturedEntry> entries_;
};

// The most bytes a read of `abs` (a path as on the live system) takes:
//  - sysfs attributes (/sys/...): 64 KiB. show() fills at most one page, and
//    pages are 64 KiB on some arm64 and ppc64 kernels.
//  - debugfs (/sys/kernel/debug/...): 1 MiB. A queue's `tags` lists a hint
//    per CPU, a few KiB on the largest machines.
//  - /proc text: 64 MiB. /proc/cpuinfo and /proc/stat grow with CPUs and
//    IRQs: a few MiB on machines with thousands of CPUs.
//  - latgovd's runtime directory (/run/latgov/...): max_text_file_bytes, as
//    when it is read by path. Its status lists every CPU and queue.
//  - anything else (/dev/cpu_dma_latency, ...): 1 MiB.
std::size_t read_cap(std::string_view abs);

class SysRoot {
  public:
    explicit SysRoot(std::filesystem::path root = "/");

    const std::filesystem::path& root() const { return root_; }
    bool is_live() const { return root_ == "/"; }

    // `abs` is an absolute path as on the live system ("/sys/block"). The
    // path joined under the root, for messages: open() and the readers
    // resolve symlinks inside the root, the kernel would not on this path.
    std::filesystem::path resolve(std::string_view abs) const;

    // open(2) of `abs` with `flags`. Under a root other than "/" the path
    // resolves inside the root (openat2 RESOLVE_IN_ROOT, or the same walk
    // done one component at a time where openat2 is missing). On failure
    // errno is left as open(2) set it.
    Result<Fd> open(std::string_view abs, int flags) const;

    // The whole file; an error naming it when it is larger than
    // read_cap(abs): "Failed to read <path>: larger than <cap> bytes".
    Result<std::string> read(std::string_view abs) const;
    bool exists(std::string_view abs) const;
    // Names in a directory, sorted; an error if it cannot be listed.
    Result<std::vector<std::string>> list(std::string_view abs) const;
    // The target of a symlink, as stored in the link.
    Result<std::string> read_link(std::string_view abs) const;
    // The last path component of the symlink's target ("nvme0" for
    // "../../nvme0"), the usual question asked of sysfs links.
    Result<std::string> link_basename(std::string_view abs) const;

    // From now on, record every path read, listed or followed.
    void start_capture();
    const CaptureLog* capture() const { return capture_.get(); }

  private:
    // -1 and errno on failure.
    int open_fd(std::string_view abs, int flags) const;
    // Records the symlinks and directories on the way to `abs`; returns
    // where it leads inside the root (empty when it does not exist).
    std::string record_path(std::string_view abs) const;
    void record(std::string path, CapturedEntry entry) const;

    std::filesystem::path root_;
    std::shared_ptr<CaptureLog> capture_;
};

// "Failed to read /sys/x: No such file or directory"
std::string errno_message(int err);

// Opens `path` below the directory `root_fd` as RESOLVE_IN_ROOT does: ".."
// never climbs above it and an absolute symlink starts again from it. The
// fallback of SysRoot::open where openat2 is missing (Linux before 5.6, a
// seccomp filter); -1 and errno on failure.
int open_in_root_walking(int root_fd, std::string_view path, int flags);

} // namespace latgov
