// Where `latgov` reads latgovd's status file: a runtime directory of this
// host, or the one inside a snapshot.
#pragma once

#include "latgov/result.hpp"
#include "latgov/sysroot.hpp"

#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <string_view>

namespace latgov {

// The status file's name in the runtime directory.
inline constexpr std::string_view status_file_name = "status.json";

// Where `latgov` reads latgovd's status. A runtime directory of this host
// (`--runtime-dir`, or /run/latgov on the live system) is read by its path,
// and the latgovd that wrote it may be asked whether it still runs. Under
// `--sysroot` without `--runtime-dir` it is the snapshot's /run/latgov, read
// like every other file of the tree (resolved inside it, size-capped), and
// its latgovd is never looked for on this host.
class StatusPlace {
  public:
    StatusPlace(const SysRoot& root, std::optional<std::filesystem::path> given);
    // The directory, for messages and for the writer's lock.
    const std::filesystem::path& dir() const { return dir_; }
    // Whether the status's writer would be a process of this host.
    bool of_this_host() const { return !tree_; }
    // The status; the error says why not (missing: latgovd is not running,
    // or the snapshot has none; unreadable; not a JSON object).
    Result<nlohmann::json> load() const;
    // The same, null for any error (a report that goes on without it).
    nlohmann::json read() const;
    // Whether a status file is there, read or not.
    bool present() const;

  private:
    std::filesystem::path dir_;
    std::optional<SysRoot> tree_;
};

} // namespace latgov
