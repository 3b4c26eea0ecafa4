// The probe behind `latgov calibrate`: read-only QD1 O_DIRECT reads
// (liburing) while the completion CPU's limit steps through its idle-state
// levels, interleaved over rounds, recording completion latency per level.
#pragma once

#include "latgov/calibration.hpp"
#include "latgov/config.hpp"
#include "latgov/runtime_dir.hpp"
#include "latgov/sysroot.hpp"
#include "latgov/topology.hpp"

#include <atomic>
#include <chrono>
#include <filesystem>
#include <optional>
#include <string>

namespace latgov {

// /proc/cpuinfo's model name, /proc/sys/kernel/osrelease and the topology's
// cpuidle driver and governor.
MachineIdentity read_machine_identity(const SysRoot& root, const Topology& topology);

struct CalibrateOptions {
    // The configuration whose device policy picks the disk: the probe reads
    // only a disk it governs, by default the first.
    Config config = default_config();
    std::string device; // empty: the first governed disk
    // Read this file (O_DIRECT) instead of the raw device, where raw access
    // is not allowed; its disk is the one probed.
    std::filesystem::path file;
    std::optional<int> cpu; // completion CPU to study; default: queue 0's
    int rounds = 5;
    int ios_per_level = 1000;
    std::chrono::seconds max_time{30}; // the whole probe stops by then
    // Opened and locked for the probe, its journal in it.
    std::filesystem::path runtime_dir{default_runtime_dir};
    // Or this one, open and locked already (latgovd's): runtime_dir is then
    // not looked up.
    const RuntimeDir* locked_runtime_dir = nullptr;
};

// Runs the probe; every value it wrote is put back before it returns, also
// when `stop` is set (Ctrl-C). A kill leaves its journal in runtime_dir,
// which latgovd (start or --restore) puts back.
Result<Calibration> run_calibration(const SysRoot& root, const CalibrateOptions& options,
                                    const std::atomic<bool>& stop);

} // namespace latgov
