// Every read of /sys, /proc and /dev goes through a SysRoot, so tests and
// `--sysroot` point the whole program at a captured tree.
#pragma once

#include "latgov/result.hpp"

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

class SysRoot {
  public:
    explicit SysRoot(std::filesystem::path root = "/");

    const std::filesystem::path& root() const { return root_; }
    bool is_live() const { return root_ == "/"; }

    // `abs` is an absolute path as on the live system ("/sys/block").
    std::filesystem::path resolve(std::string_view abs) const;

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
    void record_path(std::string_view abs) const;
    void record(std::string path, CapturedEntry entry) const;

    std::filesystem::path root_;
    std::shared_ptr<CaptureLog> capture_;
};

// "Failed to read /sys/x: No such file or directory"
std::string errno_message(int err);

} // namespace latgov
