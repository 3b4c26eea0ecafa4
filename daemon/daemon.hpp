// latgovd's event loop: one epoll over signals, uevents and the kick
// threads' wake-ups, whose timeout is the next tick. Ticks sample IO, let
// the governor decide and apply what it decides; SIGHUP reloads,
// SIGTERM/SIGINT release and stop. Each CPU's IO issue events are taken on
// that CPU by its kick thread (cpu_kick.hpp), so the first request after
// idle is held without waking another CPU first (the loop's epoll takes
// those of a CPU without one). The loop and the kick threads share the
// state under one lock, which the loop releases only while it waits.
#pragma once

#include "governed.hpp"
#include "latgov/config.hpp"
#include "latgov/cpu_kick.hpp"
#include "latgov/fd.hpp"
#include "latgov/hotplug_watch.hpp"
#include "latgov/metrics_recorder.hpp"
#include "latgov/onset.hpp"
#include "latgov/qos.hpp"
#include "latgov/rescan.hpp"
#include "latgov/result.hpp"
#include "latgov/runtime_dir.hpp"
#include "latgov/schedule.hpp"
#include "latgov/status.hpp"
#include "latgov/uevent_monitor.hpp"

#include <chrono>
#include <exception>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <sys/epoll.h>

namespace latgov {

// EX_CONFIG: a start that will not get better by restarting (a bad
// configuration, a runtime directory that holds another root's journal);
// the unit's RestartPreventExitStatus= names it.
inline constexpr int exit_config = 78;

struct Options {
    std::filesystem::path config{default_config_file};
    std::string sysroot = "/";
    std::optional<std::filesystem::path> runtime_dir;
    // --metrics-file: an empty path writes none
    std::optional<std::filesystem::path> metrics_file;
    bool config_given = false; // an explicit --config must exist
    bool check_config = false;
    bool restore = false;
    bool dry_run = false;
    // --wait-for-lock: how long to wait for a runtime directory that another
    // process has locked (`latgov calibrate`, say) before failing.
    std::chrono::seconds wait_for_lock{0};
};

// SIGINT, SIGTERM and SIGHUP are read from a signalfd by the event loop;
// main() blocks them before any start-up work.
void block_daemon_signals();

// The configuration with the command line's overrides (--runtime-dir,
// --metrics-file, --dry-run).
Result<Config> load_daemon_config(const Options& options);

class Daemon {
  public:
    Daemon(Options options, Config config);
    ~Daemon();
    Daemon(const Daemon&) = delete;
    Daemon& operator=(const Daemon&) = delete;
    // Until a signal stops it: 0 on SIGTERM/SIGINT, 1 when it cannot start
    // or fails while running (every constraint released first).
    int run();

  private:
    std::filesystem::path journal_path() const {
        return config_.daemon.runtime_dir / journal_file_name;
    }
    // Builds a new governed state and swaps it in. On failure the current
    // state stays, and governs while its devices can be sampled (a tick
    // that cannot releases everything); the next attempt waits
    // (rescan_retry_, doubling). `discovered`: the topology, if the caller
    // discovered it already.
    bool rescan(TimePoint now, RescanCause cause, std::optional<Topology> discovered = {});
    // A tick could not sample (`why`), just after a rescan made a new map
    // or not: holds nothing, says why in the status, and rescans again
    // later, each time later than the last while new maps fail too.
    void cannot_sample(TimePoint now, const std::string& why, bool fresh_map);
    void install(GovernedState state, TimePoint now, RescanCause cause);
    // Rescans when a debounced burst of uevents or hotplug steps is due,
    // when a failed rescan is due again, when the online CPU set changed, or
    // when the periodic check finds another topology; whether that made a
    // new map.
    bool rescan_if_due(TimePoint now);
    // Tries again, when due, to open the statistics of devices the sampler
    // left out; the next sample rebases when one opened.
    void reopen_left_out(TimePoint now);
    // When the next rescan is due: a burst of uevents or hotplug steps, or
    // a failed rescan to try again.
    std::optional<TimePoint> rescan_at() const;
    void on_uevents(TimePoint now);
    // Without uevents: the CPU hotplug watch opened anew on `cpus`, the
    // online CPUs of the map just installed (an offline CPU's event died
    // with it), and its steps read.
    void watch_hotplug(const std::vector<int>& cpus, TimePoint now);
    void on_hotplug(TimePoint now);
    // Feeds the watchdog, samples (rescanning if due or if sampling fails),
    // lets the governor decide and applies it, then what else is due.
    void tick(TimePoint now);
    // The service manager's watchdog, once its feed period has passed.
    void feed_watchdog(TimePoint now);
    // A sample into sample_, after a rescan if one is due, and with a rescan
    // first if sampling fails (a device went away); `rescanned`: a rescan
    // made a new map.
    Result<void> sample_or_rescan(TimePoint now, bool& rescanned);
    // The governor's view of a sample that worked (anew, after a span that
    // could not sample on the same map), and the holds it decides.
    void observe_sample(TimePoint now, bool rescanned);
    // The evidence, if a verdict changed, for the loop to save once no queue
    // is active (write_pending).
    void queue_evidence_save();
    // The status, metrics and journal-record checks due at a tick, one
    // that could sample or not.
    void housekeeping(TimePoint now);
    // Whether the status is to be written now (at most every
    // status_interval, which the caller checks).
    bool status_due() const;
    // Writes what changed, and what failed before; the CPUs held anew are
    // woken (kick_held_anew) unless `kick` is false, when the caller does it
    // later. What it made stricter: a write that failed made nothing
    // stricter.
    Tightened apply(const Holds& holds, TimePoint now, bool kick = true);
    // Records the onset (find_onset) of the requests that activated a queue
    // in one drain (`activating`), if one waited for what the wake-up's
    // writes so far (`writes`, this drain's last) tightened; woken_ns:
    // CLOCK_MONOTONIC when latgovd woke.
    void record_onset(std::vector<IssuedRequest> activating, const std::vector<LimitWrite>& writes,
                      std::uint64_t woken_ns);
    void retry_failed_holds(TimePoint now);
    void kick_held_anew();
    // A thread per online CPU to wake it: started, or brought up to date
    // with the online CPUs.
    void start_kicker();
    StatusInput status_input(TimePoint now) const;
    // How an idle daemon wakes, for the status.
    std::string io_events_state() const;
    void write_status(TimePoint now);
    // The service manager's one-line status: governing, or why not; after
    // `also`, other assignments of the same message ("READY=1\n").
    void notify_state(const char* also = "") const;
    // Formats the metrics for the next wait to write (write_pending).
    void queue_metrics(TimePoint now);
    // The file and any write of it still pending.
    void remove_metrics_file();
    void reload(TimePoint now);
    // Releases every constraint and removes what a running latgovd keeps;
    // false when something could not be put back (the status stays).
    bool shutdown();
    // Arms the IO events while idle and sets wake_at_ to the next deadline.
    void schedule_wake(TimePoint now);
    // What wakes an idle daemon: the IO events, armed while idle unless
    // requests come alone (then the recorder times them) or nothing can be
    // sampled (then neither).
    void update_idle_watch(bool sampling, bool active);
    // Takes the requests the events saw; true when one activated a queue.
    bool on_io_events(TimePoint now);
    // The IO events are ready: takes them and sets the next deadline.
    void on_io_ready(TimePoint now);
    // The same on a CPU's kick thread, under the lock; true when the loop
    // must wake: its deadline moved earlier, or this failed.
    bool on_cpu_io_ready() noexcept;
    // Adds `fd` to the loop's epoll; false, logged naming `what`, when
    // that fails.
    bool watch(int fd, std::string_view what);
    // Takes the IO events out of the loop's and the threads' epolls, before
    // they close.
    void unwatch_events();
    // Each IO event's fd to its CPU's kick thread, or to the loop's epoll
    // where the CPU has none.
    void watch_events();
    // Feeds the requests the recorder saw to the governor.
    void take_recorded_requests();
    // Holds ahead of a periodic request, if its window is due.
    void open_window(TimePoint now);
    // How much earlier than due the loop may wake for a window: epoll_wait
    // rounds its timeout up to whole milliseconds.
    std::chrono::milliseconds window_slack() const;
    // The governor's windows that ended since the last call, to the metrics.
    void count_windows();
    // The runtime directory opened, locked and restored from (nothing under
    // --dry-run); false, logged, if it cannot be. While someone else holds
    // its lock, waits up to --wait-for-lock for it (lock_runtime_dir); a
    // stop signal meanwhile ends the wait, false with stopped_before_start_.
    bool open_runtime_dir();
    // The uevent socket, the signalfd, the loop's epoll and its wake-up.
    bool open_event_loop();
    // Everything up to "ready": false, logged, when latgovd cannot run.
    bool start();
    // One epoll wait, the lock released meanwhile and the pending files
    // written first (write_pending); epoll's result, errno kept.
    int wait_for_events(std::span<epoll_event> events, std::unique_lock<std::mutex>& lock);
    // SIGHUP reloads; the exit status when a signal stops the daemon.
    std::optional<int> on_signals();
    int run_loop(std::unique_lock<std::mutex>& lock);
    // The evidence and metrics files a tick made due, written by the loop
    // thread with the lock down: a disk write (the evidence's fsync, the
    // metrics' rename on a governed disk) may wait long, and the first
    // request of the next burst, likely meanwhile, must not wait with it.
    void write_pending();
    // What the first requests after idle would hold (journaled before sleeping).
    std::map<int, LatencyLimit> likely_holds() const;

    Options options_;
    Config config_;
    SysRoot root_;
    // Open and locked for the whole run (none under --dry-run, which writes
    // nothing there).
    std::optional<RuntimeDir> runtime_;
    PerCpuHolder percpu_;
    GlobalHolder global_;
    // What the loop's thread and the kick threads share: the lock over the
    // daemon's state, and whether the threads may still enter. Their
    // handler holds it too, so it outlives the members destroyed before
    // the kicker; `open` is false once the daemon releases or goes.
    struct Gate {
        std::mutex mutex;
        bool open = true;
        Fd wake; // eventfd in the loop's epoll: a kick thread moved its deadline earlier
    };
    std::shared_ptr<Gate> gate_ = std::make_shared<Gate>();
    // Wakes the CPUs a per-CPU limit was just written for, and takes each
    // CPU's IO events there (none under --sysroot: the tree's CPUs are not
    // this machine's).
    std::unique_ptr<CpuKicker> kicker_;
    std::vector<int> held_anew_; // CPUs held, or held more strictly, since the last kick
    std::unique_ptr<GovernedState> state_;
    IoSample sample_;
    Holds holds_;
    Fd epoll_, signals_;
    // What a kick thread threw while taking IO events: the loop rethrows it.
    std::exception_ptr cpu_thread_failed_;
    TimePoint wake_at_{};           // the next wake-up (tick, status, window), epoll's timeout
    TimePoint loop_waits_until_{};  // the wake_at_ of the loop's current wait
    bool have_epoll_pwait2_ = true; // else epoll_wait, in milliseconds
    TickCadence cadence_;
    TimePoint last_status_{};
    TimePoint last_watchdog_{};
    std::chrono::microseconds watchdog_interval_{0};
    // The kernel's uevents; none under --sysroot (they describe this machine,
    // not the tree) or when the socket cannot be opened.
    std::optional<UeventMonitor> uevents_;
    ChangeBurst uevent_burst_; // the topology-changing uevents not yet rescanned
    Uevent last_uevent_;       // the latest of them, for the log
    // Without uevents (live, no socket): CPU hotplug steps as they happen,
    // and those not yet rescanned.
    std::optional<HotplugWatch> hotplug_;
    ChangeBurst hotplug_burst_;
    bool hotplug_unwatched_ = false; // the watch could not be opened: said once
    std::string fingerprint_;        // topology_fingerprint() of the governed state
    TimePoint next_periodic_check_{};
    bool online_unreadable_ = false; // the last online CPU check could not read the list
    TimePoint last_online_check_{};
    // The time suspended since boot (suspended_time) at the last scan or
    // online check that could read it: grown since, the host slept
    // (slept_between).
    std::optional<std::chrono::nanoseconds> boot_offset_;
    TimePoint next_rescan_{}; // a failed rescan (or sample) is not retried before this
    // Why the last rescan was made, while it failed: tried again from
    // next_rescan_ on, whatever else happens (a reload's has nothing else
    // that would bring it back).
    std::optional<RescanCause> failed_rescan_;
    Backoff rescan_retry_;
    Backoff sample_retry_; // after a new map that cannot be sampled
    Backoff reopen_retry_; // of the statistics a device had none of
    TimePoint next_reopen_{};
    std::vector<std::size_t> reopened_; // sampler slots opened since the last observe
    bool status_failing_ = false;       // the last status write failed (logged once)
    std::string sampling_error_;        // why the last tick could not sample, for the status
    bool holds_dropped_ = false;        // released since nothing could be observed
    bool status_dirty_ = true;
    // The last status written lists an active queue.
    bool status_shows_activity_ = false;
    // Samples in a row that found a queue active, and whether latgovd
    // wrote its status or metrics since the sample before the last
    // (status_due).
    std::uint64_t active_samples_ = 0;
    bool io_may_be_own_ = false;
    TimePoint last_sample_at_{};
    OnsetDelays onset_;      // request issued -> constraint written
    OnsetDelays onset_wake_; // of that, request issued -> latgovd running
    OnsetDelays onset_work_; // and latgovd running -> constraint written
    TimePoint last_change_{};
    bool isolated_ = false; // the governor's isolated_requests() at the last schedule_wake
    std::optional<TimePoint> window_at_;                  // when a pre-armed window opens next
    std::uint64_t counted_hits_ = 0, counted_misses_ = 0; // of the governor's windows
    MetricsRecorder metrics_;
    TimePoint last_metrics_{};
    TimePoint last_record_check_{};
    bool evidence_unsaved_ = false; // a verdict changed; saved once no queue is active
    struct PendingEvidence {
        EvidenceBook book;
        std::filesystem::path file;
    };
    // What a tick found due, saved by the loop with the lock down.
    std::optional<PendingEvidence> evidence_to_save_;
    struct PendingMetrics {
        std::filesystem::path file;
        std::string text;
    };
    std::optional<PendingMetrics> metrics_to_write_;
    bool stopped_before_start_ = false; // a stop signal ended the lock's wait
    int start_failure_status_ = 1;      // the exit status of a start that failed
    bool metrics_failed_ = false;       // warn once until a write succeeds again
};

} // namespace latgov
