// latgov's configuration: TOML files -> validated, immutable Config.
#pragma once

#include "latgov/result.hpp"

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace latgov {

enum class Mode { automatic, fixed, off };
enum class Backend { percpu, global, dry_run };
std::string_view to_string(Mode mode);
std::string_view to_string(Backend backend);

// linger_ms = "auto" keeps a queue active this long after a request that
// ends a gap of stream_gap or more, and at least this long in a stream
// (choose_linger).
inline constexpr std::chrono::milliseconds auto_linger_floor{3};

// How one device is governed.
struct Policy {
    Mode mode = Mode::automatic;
    Backend backend = Backend::percpu;
    // fixed: the limit to hold (0 = poll only).
    std::uint32_t limit_us = 0;
    // auto: allowed wake-up cost as a fraction of the mean request latency.
    double latency_fraction = 0.1;
    // auto: clamps of the chosen limit.
    std::uint32_t min_limit_us = 0;
    std::optional<std::uint32_t> max_limit_us;
    // A queue stays active this long after its last IO: `linger` when set
    // (linger_ms = N, 0 included), else chosen from the gaps between
    // requests (the default, linger_ms = "auto"), never below
    // auto_linger_floor. Under "auto" `linger` is unused: a number
    // [defaults] gave does not carry over to a [[device]] that says "auto".
    std::chrono::milliseconds linger{auto_linger_floor};
    bool linger_auto = true;
    // Also hold the CPUs where tasks wait for the active queues' IO.
    bool waiter_cpus = true;
    // Hold ahead of requests after idle that come at a steady period.
    bool prearm = true;
    // auto: completions needed in a window before the mean is trusted.
    std::uint32_t min_samples = 16;
};

// A [[device]] entry: every given matcher must match; empty = not given.
// (The `{}` let `{.serial = "..."}` leave the rest out without a -Wextra warning.)
struct DeviceMatch {
    std::string name{};      // glob on the kernel name (fnmatch)
    std::string model{};     // glob, on the whitespace-trimmed model
    std::string serial{};    // exact, whitespace-trimmed
    std::string wwid{};      // exact: NVMe wwid / NQN
    std::string transport{}; // exact: pcie, tcp, rdma, fc, virtio, ...
};

// The policy keys one table set, [defaults] or a [[device]] entry; a key it
// did not set comes from below it (the built-in policy, or [defaults]).
struct PolicyOverrides {
    std::optional<Mode> mode;
    std::optional<Backend> backend;
    std::optional<std::uint32_t> limit_us;
    std::optional<double> latency_fraction;
    std::optional<std::uint32_t> min_limit_us;
    std::optional<std::uint32_t> max_limit_us;
    std::optional<std::chrono::milliseconds> linger;
    std::optional<bool> linger_auto;
    std::optional<bool> waiter_cpus;
    std::optional<bool> prearm;
    std::optional<std::uint32_t> min_samples;
};

// A [[device]] entry: which devices it applies to and what it overrides.
struct DeviceRule : PolicyOverrides {
    DeviceMatch match;
    std::string origin; // "file:line:column" of the entry, for logs
};

// Where latgov's files live unless configured otherwise (one home for each).
// The configuration is /etc/latgov/latgov.toml (the build may override it:
// LATGOV_CONFIG_FILE, set by CMake: /etc/latgov/latgov.toml unless overridden).
#ifndef LATGOV_CONFIG_FILE
#define LATGOV_CONFIG_FILE "/etc/latgov/latgov.toml"
#endif
inline constexpr std::string_view default_config_file = LATGOV_CONFIG_FILE;
inline constexpr std::string_view default_runtime_dir = "/run/latgov";
inline constexpr std::string_view default_calibration_file = "/var/lib/latgov/calibration.toml";
inline constexpr std::string_view default_evidence_file = "/var/lib/latgov/evidence";
// node_exporter's textfile collector directory on Debian.
inline constexpr std::string_view default_metrics_file =
    "/var/lib/prometheus/node-exporter/latgov.prom";

struct DaemonSettings {
    // Sampling period while any governed queue is active.
    std::chrono::milliseconds sample_interval{5};
    // Once the set of active queues has not changed for 100 ms, the period
    // stretches to this (a steady stream needs no 5 ms watch; its end is then
    // seen within linger + steady_interval), unless the last tick saw the
    // requests sparser than the linger (Governor::sparse_requests).
    std::chrono::milliseconds steady_interval{20};
    // Sampling period while everything is idle (when no event source wakes us).
    std::chrono::milliseconds idle_interval{50};
    // How often the status file is rewritten while something changes.
    std::chrono::milliseconds status_interval{1000};
    std::filesystem::path runtime_dir{default_runtime_dir};
    std::filesystem::path calibration_file{default_calibration_file};
    // What holding bought at each idle gap, learnt from live IO and reused
    // at the next start on the same machine and kernel.
    std::filesystem::path evidence_file{default_evidence_file};
    std::string log_level = "info";
    // Sleep with no timer while idle and wake on the first request (a perf
    // tracepoint event); off, or where perf events are refused, idle
    // sampling every idle_interval takes over.
    bool io_events = true;
    // Read each governed queue's in-flight count from debugfs every tick
    // (hctxN/tags busy=), so a queue with a slow request in flight stays
    // active; each read takes a queue mutex in the kernel, hence opt-in.
    bool queue_inflight = false;
    // Run `latgov calibrate` at start when the calibration file is missing,
    // unreadable or of another machine or kernel.
    bool calibrate_on_start = false;
    // Prometheus textfile (node_exporter's textfile collector). Empty: none.
    // The default is written only where its directory exists; a path the
    // configuration sets is always written.
    std::filesystem::path metrics_file{default_metrics_file};
    bool metrics_file_configured = false;
};

struct Config {
    DaemonSettings daemon;
    Policy defaults;
    std::vector<DeviceRule> devices;
    std::vector<std::filesystem::path> sources; // files read, in order
};

// The configuration used when no file exists.
Config default_config();

// Parses one TOML document. `source_name` is used in error messages.
Result<Config> parse_config(std::string_view text, const std::string& source_name);

// One configuration document: its text and the file its errors name.
struct ConfigText {
    std::string text;
    std::filesystem::path source;
};

// The documents in order (the main file, then its drop-ins), each on top of
// the ones before: its [daemon]/[defaults] keys override, its [[device]]
// entries are appended. None: the defaults. Reading the files is the
// edge's (config_file.hpp).
Result<Config> parse_config_layers(std::span<const ConfigText> layers);

// What the device identity looks like to the matcher.
struct DeviceIdentity {
    std::string name{};
    std::string model{};
    std::string serial{};
    std::string wwid{};
    std::string transport{};
    // A multipath path disk's head (nvme1n1 for nvme1c0n1): a name matcher
    // matches either name, so a rule written for the namespace reaches the
    // paths that carry its IO. Empty for any other disk.
    std::string head{};
};

// Whether every matcher the entry gives matches the device. Disks whose
// queues have no IRQ of their own (loop, null_blk) are governed only when a
// [[device]] entry matches them.
bool matches(const DeviceMatch& match, const DeviceIdentity& device);

// One warning per [[device]] entry with a name matcher that matches none of
// `devices` (every block device of the machine: a rule that turns one off
// matches it too), naming where it is and every matcher it gives:
// "<file:line:column>: [[device]] name = "nvme9n1" matches no block device",
// or `name = "nvme0n1", serial = "S1"` where the name matches and the
// serial does not.
std::vector<std::string> unmatched_name_rules(const Config& config,
                                              std::span<const DeviceIdentity> devices);

// The policy for one device: [defaults] overlaid by every matching [[device]]
// entry in file order (later entries win per key). Each entry's clamps are
// checked at load time; should two entries still cross (max_limit_us <
// min_limit_us), the floor wins and max_limit_us is raised to min_limit_us.
Policy resolve_policy(const Config& config, const DeviceIdentity& device);

} // namespace latgov
