// `latgov calibrate`: a read-only QD1 O_DIRECT probe (liburing) that steps
// the completion CPU's limit through its idle-state levels, interleaved over
// rounds, and records completion latency per level.
#pragma once

#include "latgov/calibration.hpp"
#include "latgov/sysroot.hpp"

#include <atomic>
#include <chrono>
#include <filesystem>
#include <optional>
#include <string>

namespace latgov {

struct CalibrateOptions {
    std::string device; // empty: the first governed disk
    // Read this file (O_DIRECT) instead of the raw device, where raw access
    // is not allowed; its disk is the one probed.
    std::filesystem::path file;
    std::optional<int> cpu; // completion CPU to study; default: queue 0's
    int rounds = 5;
    int ios_per_level = 1000;
    std::chrono::seconds max_time{30}; // the whole probe stops by then
    std::filesystem::path runtime_dir = "/run/latgov";
    // Lock runtime_dir for the probe; latgovd, which holds it already, does not.
    bool take_lock = true;
};

// Runs the probe; every value it wrote is put back before it returns, also
// when `stop` is set (Ctrl-C). A kill leaves its journal in runtime_dir,
// which latgovd (start or --restore) puts back.
Result<Calibration> run_calibration(const SysRoot& root, const CalibrateOptions& options,
                                    const std::atomic<bool>& stop);

} // namespace latgov
