#include "daemon.hpp"

#include "evidence.hpp"
#include "idle_costs.hpp"
#include "latgov/replace_file.hpp"
#include "latgov/schedule.hpp"
#include "latgov/status.hpp"
#include "latgov/topology_json.hpp"
#include "logging.hpp"

#include <algorithm>
#include <csignal>
#include <cstring>
#include <linux/magic.h>
#include <spdlog/spdlog.h>
#include <sys/epoll.h>
#include <sys/signalfd.h>
#include <sys/statfs.h>
#include <sys/timerfd.h>
#include <systemd/sd-daemon.h>
#include <time.h>

namespace latgov {

namespace {

// A failed rescan (a device mid-reset, a controller going away) is retried
// after this, doubling up to max_rescan_retry; the current state governs
// meanwhile.
constexpr std::chrono::milliseconds first_rescan_retry{100};
constexpr std::chrono::milliseconds max_rescan_retry{5000};

// CPU hotplug moves managed IRQs: the online set is compared this often.
constexpr std::chrono::seconds online_check_interval{5};

// The metrics follow the status writes, and are refreshed this often while
// idle so a scrape can tell a live daemon from a stale file.
constexpr std::chrono::seconds metrics_refresh{30};

double unix_time_now() {
    return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch())
        .count();
}

std::string read_online(const SysRoot& root) {
    auto online = root.read("/sys/devices/system/cpu/online");
    return online ? *online : std::string{};
}

} // namespace

Result<Config> load_daemon_config(const Options& o) {
    auto config = load_config(o.config);
    if (!config)
        return config;
    if (o.runtime_dir)
        config->daemon.runtime_dir = *o.runtime_dir;
    if (o.dry_run) {
        config->defaults.backend = Backend::dry_run;
        for (auto& rule : config->devices)
            rule.backend.reset();
    }
    return config;
}

Daemon::Daemon(Options options, Config config)
    : options_(std::move(options)), config_(std::move(config)), root_(options_.sysroot),
      percpu_(root_, journal_path(), log_warning), global_(root_, log_warning),
      rescan_retry_(first_rescan_retry), metrics_(unix_time_now()) {}

bool Daemon::rescan(TimePoint now) {
    auto state = build_governed_state(root_, config_, state_.get());
    if (!state) {
        spdlog::error("{}; keeping the current devices, retrying in {} ms", state.error().message,
                      rescan_retry_.count());
        next_rescan_ = now + rescan_retry_;
        rescan_retry_ = std::min(rescan_retry_ * 2, max_rescan_retry);
        return false;
    }
    install(std::move(*state), now);
    return true;
}

void Daemon::install(GovernedState state, TimePoint now) {
    // The old events close here, which also takes them out of epoll.
    state_ = std::make_unique<GovernedState>(std::move(state));
    metrics_.count_rescan();
    rescan_retry_ = first_rescan_retry;
    next_rescan_ = {};
    online_text_ = read_online(root_);
    last_online_check_ = now;
    log_governed_state(*state_);
    if (epoll_ && state_->events)
        for (int fd : state_->events->fds())
            watch(fd);
    status_dirty_ = true;
}

void Daemon::watch(int fd) {
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.fd = fd;
    if (::epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, fd, &ev) != 0)
        spdlog::warn("Failed to watch fd {}: {}", fd, errno_message(errno));
}

void Daemon::on_io_events(TimePoint now) {
    auto& events = state_->events;
    if (!events)
        return;
    std::uint64_t first_ns = 0; // the earliest request that activated a queue
    for (const auto& request : events->drain())
        if (state_->governor.on_request_issued(request.dev, request.cpu, now) &&
            (first_ns == 0 || request.time_ns < first_ns))
            first_ns = request.time_ns;
    if (first_ns != 0) {
        spdlog::debug("woken by a request issued at {} ns", first_ns);
        apply(state_->governor.holds(), now);
        last_change_ = now;
        timespec ts{};
        ::clock_gettime(CLOCK_MONOTONIC, &ts); // the clock the events are stamped with
        const auto done_ns = static_cast<std::uint64_t>(ts.tv_sec) * 1000000000u +
                             static_cast<std::uint64_t>(ts.tv_nsec);
        if (done_ns >= first_ns) {
            onset_.record(std::chrono::nanoseconds(done_ns - first_ns));
            metrics_.observe_onset(static_cast<double>(done_ns - first_ns) / 1e9);
        }
    }
    // Only once the constraint is written: disarming costs a call per CPU.
    // From here sampling follows the IO; the events would only cost.
    events->disarm();
    events->drain();
}

void Daemon::apply(const Holds& holds, TimePoint now) {
    std::map<int, LatencyLimit> wanted;
    for (const auto& [cpu, hold] : holds.percpu)
        wanted[cpu] = hold.limit;
    for (const auto& change : diff_holds(holds_.percpu, holds.percpu))
        spdlog::debug("cpu {}: {} -> {}", change.cpu, describe_limit(change.from),
                      describe_limit(change.to));
    for (const auto& change : diff_holds(holds_.dry_run, holds.dry_run))
        spdlog::info("dry-run: cpu {} would go {} -> {}", change.cpu, describe_limit(change.from),
                     describe_limit(change.to));
    if (holds.global != holds_.global)
        spdlog::debug("global: {} -> {}", describe_limit(holds_.global),
                      describe_limit(holds.global));
    if (!diff_holds(holds_.percpu, holds.percpu).empty() || holds.global != holds_.global ||
        !diff_holds(holds_.dry_run, holds.dry_run).empty())
        status_dirty_ = true;
    percpu_.apply(wanted, now);
    metrics_.observe_percpu(percpu_.held(), now);
    global_.apply(holds.global, now);
    holds_ = holds;
}

StatusInput Daemon::status_input(TimePoint now) const {
    return {state_->governor,
            holds_,
            percpu_,
            global_,
            state_->topology,
            state_->cost_source,
            state_->events_state,
            onset_.summary(),
            now};
}

void Daemon::write_status(TimePoint now) {
    if (auto written = latgov::write_status(status_path(), build_status(status_input(now)));
        !written)
        spdlog::warn("{}", written.error().message);
    last_status_ = now;
    status_dirty_ = false;
    write_metrics(now);
}

void Daemon::write_metrics(TimePoint now) {
    const auto& path = config_.daemon.metrics_file;
    if (path.empty() || (!config_.daemon.metrics_file_configured &&
                         !std::filesystem::is_directory(path.parent_path())))
        return;
    last_metrics_ = now;
    const auto logged = logged_counts();
    const auto snapshot = metrics_.snapshot(status_input(now), state_->events.has_value(),
                                            logged.warnings, logged.errors);
    if (auto written = replace_file(path, format_metrics(snapshot)); !written) {
        if (!metrics_failed_)
            spdlog::warn("{}", written.error().message);
        metrics_failed_ = true;
    } else {
        metrics_failed_ = false;
    }
}

void Daemon::tick(TimePoint now) {
    // CPU hotplug moves managed IRQs: a changed online set means a new map.
    if (now - last_online_check_ >= online_check_interval && now >= next_rescan_) {
        last_online_check_ = now;
        auto online = read_online(root_);
        if (online != online_text_) {
            spdlog::info("online CPUs changed to {}, rescanning", trim(online));
            rescan(now);
        }
    }
    if (auto sampled = state_->sampler.sample(sample_); !sampled) {
        // A device went away (or a controller reset): map the machine anew.
        if (now >= next_rescan_) {
            spdlog::warn("{}; rescanning devices", sampled.error().message);
            rescan(now);
        }
        return;
    }
    read_issue_counters(*state_, sample_);
    const bool log_windows = spdlog::should_log(spdlog::level::debug);
    const auto windows_before =
        log_windows ? window_counts(state_->governor) : std::vector<std::uint64_t>{};
    const bool events_armed = state_->events && state_->events->armed();
    if (state_->governor.observe(sample_, now, events_armed)) {
        apply(state_->governor.holds(), now);
        last_change_ = now;
    }
    if (log_windows)
        log_finished_windows(state_->governor, windows_before);
    if (save_evidence_if_changed(state_->governor, config_.daemon))
        status_dirty_ = true;
    // At most one status write per status_interval: the file may live on a
    // disk latgov governs, and every write there is IO it would react to.
    if ((status_dirty_ || state_->governor.any_active()) &&
        now - last_status_ >= config_.daemon.status_interval)
        write_status(now);
    if (now - last_metrics_ >= metrics_refresh)
        write_metrics(now);
    if (watchdog_interval_.count() > 0 && now - last_watchdog_ >= watchdog_interval_ / 2) {
        sd_notify(0, "WATCHDOG=1");
        last_watchdog_ = now;
    }
}

void Daemon::arm_timer(TimePoint now) {
    const bool active = state_->governor.any_active();
    auto& events = state_->events;
    if (!active && events && !events->armed()) {
        if (auto armed = events->arm(); !armed) {
            spdlog::warn("{}; sampling while idle instead", armed.error().message);
            state_->events_state = "unavailable: " + armed.error().message;
            events.reset();
        }
    }
    const ScheduleState schedule{active,
                                 !active && events.has_value(),
                                 last_change_,
                                 next_tick_,
                                 status_dirty_,
                                 last_status_,
                                 watchdog_interval_};
    const auto deadline = next_deadline(schedule, config_.daemon, now);
    next_tick_ = deadline.next_tick;
    const auto ns =
        std::chrono::duration_cast<std::chrono::nanoseconds>(deadline.wake.time_since_epoch())
            .count();
    itimerspec spec{};
    spec.it_value.tv_sec = static_cast<time_t>(ns / 1000000000);
    spec.it_value.tv_nsec = static_cast<long>(ns % 1000000000);
    ::timerfd_settime(timer_.get(), TFD_TIMER_ABSTIME, &spec, nullptr);
}

void Daemon::reload(TimePoint now) {
    sd_notifyf(
        0, "RELOADING=1\nSTATUS=Reloading configuration\nMONOTONIC_USEC=%llu",
        static_cast<unsigned long long>(
            std::chrono::duration_cast<std::chrono::microseconds>(now.time_since_epoch()).count()));
    auto config = load_daemon_config(options_);
    if (!config) {
        spdlog::error("Failed to reload configuration, keeping the running one: {}",
                      config.error().message);
    } else {
        if (config->daemon.runtime_dir != config_.daemon.runtime_dir)
            spdlog::warn("runtime_dir cannot change on reload, keeping {}",
                         config_.daemon.runtime_dir.string());
        config->daemon.runtime_dir = config_.daemon.runtime_dir;
        config_ = std::move(*config);
        spdlog::set_level(spdlog::level::from_str(config_.daemon.log_level));
        spdlog::info("configuration reloaded");
    }
    rescan(now);
    status_dirty_ = true;
    sd_notify(0, "READY=1\nSTATUS=Governing");
}

void Daemon::shutdown() {
    sd_notify(0, "STOPPING=1\nSTATUS=Releasing constraints");
    percpu_.release_all();
    global_.apply(std::nullopt, std::chrono::steady_clock::now());
    std::error_code ec;
    std::filesystem::remove(status_path(), ec);
    // node_exporter would go on serving a stopped daemon's last values.
    if (!config_.daemon.metrics_file.empty())
        std::filesystem::remove(config_.daemon.metrics_file, ec);
    spdlog::info("stopped; every constraint released");
    if (state_)
        save_unfinished_evidence(state_->governor, config_.daemon);
}

int Daemon::run() {
    std::error_code ec;
    std::filesystem::create_directories(config_.daemon.runtime_dir, ec);
    if (ec) {
        spdlog::error("Failed to create {}: {}", config_.daemon.runtime_dir.string(), ec.message());
        return 1;
    }
    struct statfs fs {};
    if (::statfs(config_.daemon.runtime_dir.c_str(), &fs) == 0 && fs.f_type != TMPFS_MAGIC &&
        fs.f_type != RAMFS_MAGIC)
        spdlog::warn("{} is not on tmpfs: latgovd's own journal and status writes there are IO "
                     "that a governed disk may see; use a tmpfs (systemd's /run is one)",
                     config_.daemon.runtime_dir.string());
    // A run that was killed may have left values behind: put them back first.
    if (auto restored = restore_journal(root_, journal_path(), log_warning); !restored)
        spdlog::error("{}", restored.error().message);
    calibrate_if_missing(root_, config_.daemon);
    auto state = build_governed_state(root_, config_);
    if (!state) {
        spdlog::error("{}", state.error().message);
        return 1;
    }
    auto now = std::chrono::steady_clock::now();
    install(std::move(*state), now);
    spdlog::info("idle-state costs: {}", state_->cost_source);
    fmt::print(stderr, "{}", format_topology_table(state_->topology));

    sigset_t mask;
    sigemptyset(&mask);
    for (int sig : {SIGINT, SIGTERM, SIGHUP})
        sigaddset(&mask, sig);
    sigprocmask(SIG_BLOCK, &mask, nullptr);
    signals_ = Fd(::signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK));
    timer_ = Fd(::timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK));
    epoll_ = Fd(::epoll_create1(EPOLL_CLOEXEC));
    if (!signals_ || !timer_ || !epoll_) {
        spdlog::error("Failed to set up the event loop: {}", errno_message(errno));
        return 1;
    }
    watch(signals_.get());
    watch(timer_.get());
    if (state_->events)
        for (int fd : state_->events->fds())
            watch(fd);
    std::uint64_t watchdog_usec = 0;
    if (sd_watchdog_enabled(0, &watchdog_usec) > 0)
        watchdog_interval_ = std::chrono::microseconds(watchdog_usec);

    now = std::chrono::steady_clock::now();
    next_tick_ = now;
    tick(now);
    write_status(now);
    arm_timer(now);
    sd_notify(0, "READY=1\nSTATUS=Governing");
    spdlog::info("latgovd ready");

    for (;;) {
        epoll_event events[16];
        int n = ::epoll_wait(epoll_.get(), events, 16, -1);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            spdlog::error("epoll_wait failed: {}", errno_message(errno));
            shutdown();
            return 1;
        }
        for (int i = 0; i < n; ++i) {
            if (events[i].data.fd == signals_.get()) {
                signalfd_siginfo info{};
                while (::read(signals_.get(), &info, sizeof info) == sizeof info) {
                    if (info.ssi_signo == SIGHUP) {
                        now = std::chrono::steady_clock::now();
                        reload(now);
                        next_tick_ = now;
                        arm_timer(now); // the rescan made new, unarmed IO events
                    } else {
                        spdlog::info("received {}, stopping",
                                     strsignal(static_cast<int>(info.ssi_signo)));
                        shutdown();
                        return 0;
                    }
                }
            } else if (events[i].data.fd == timer_.get()) {
                std::uint64_t expirations = 0;
                [[maybe_unused]] auto r = ::read(timer_.get(), &expirations, sizeof expirations);
                now = std::chrono::steady_clock::now();
                tick(now);
                arm_timer(now);
            } else if (state_->events) {
                now = std::chrono::steady_clock::now();
                on_io_events(now);
                next_tick_ = now; // sample from here on, one period after the wake
                arm_timer(now);
            }
        }
    }
}

} // namespace latgov
