#include "latgov/daemon.hpp"

#include "latgov/calibrate.hpp"
#include "latgov/calibration.hpp"
#include "latgov/config.hpp"
#include "latgov/governor.hpp"
#include "latgov/io_events.hpp"
#include "latgov/metrics.hpp"
#include "latgov/qos.hpp"
#include "latgov/sampler.hpp"
#include "latgov/status.hpp"
#include "latgov/topology_json.hpp"

#include <algorithm>
#include <atomic>
#include <csignal>
#include <cstdlib>
#include <fstream>
#include <linux/magic.h>
#include <memory>
#include <optional>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/sinks/systemd_sink.h>
#include <spdlog/spdlog.h>
#include <sys/epoll.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/timerfd.h>
#include <systemd/sd-daemon.h>

namespace latgov {

namespace {

constexpr int exit_config = 78; // EX_CONFIG: systemd does not restart on it

constexpr std::string_view usage = R"(Usage: latgovd [OPTIONS]

Holds CPU wake-up latency limits on the CPUs that complete block IO, only
while IO is outstanding. Runs in the foreground (systemd Type=notify).

Options:
  --config FILE      configuration (default )" LATGOV_CONFIG_FILE R"(; missing = embedded default)
  --check-config     validate the configuration and exit 0 (valid) or 1
  --restore          put back the per-CPU values a previous run left, and exit
  --sysroot DIR      read and write sysfs/procfs/dev under DIR (tests)
  --runtime-dir DIR  override [daemon] runtime_dir
  --dry-run          compute and log, change nothing (backend dry-run everywhere)
  -h, --help         this text
)";

struct Options {
    std::filesystem::path config = LATGOV_CONFIG_FILE;
    std::string sysroot = "/";
    std::optional<std::filesystem::path> runtime_dir;
    bool check_config = false;
    bool restore = false;
    bool dry_run = false;
};

std::optional<Options> parse_options(int argc, char** argv) {
    Options o;
    for (int i = 1; i < argc; ++i) {
        std::string_view arg = argv[i];
        auto value = [&]() -> const char* { return i + 1 < argc ? argv[++i] : nullptr; };
        if (arg == "-h" || arg == "--help") {
            fmt::print("{}", usage);
            std::exit(0);
        } else if (arg == "--check-config") {
            o.check_config = true;
        } else if (arg == "--restore") {
            o.restore = true;
        } else if (arg == "--dry-run") {
            o.dry_run = true;
        } else if (arg == "--config" || arg == "--sysroot" || arg == "--runtime-dir") {
            const char* v = value();
            if (!v) {
                fmt::print(stderr, "latgovd: {} needs a value\n{}", arg, usage);
                return std::nullopt;
            }
            if (arg == "--config")
                o.config = v;
            else if (arg == "--sysroot")
                o.sysroot = v;
            else
                o.runtime_dir = v;
        } else {
            fmt::print(stderr, "latgovd: unknown option {}\n{}", arg, usage);
            return std::nullopt;
        }
    }
    return o;
}

void setup_logging(const std::string& level) {
    std::shared_ptr<spdlog::logger> logger;
    // Under systemd stderr already goes to the journal: one sink, or lines
    // appear twice.
    if (std::getenv("JOURNAL_STREAM"))
        logger = std::make_shared<spdlog::logger>(
            "latgovd", std::make_shared<spdlog::sinks::systemd_sink_mt>("latgovd", false));
    else
        logger = spdlog::stderr_color_mt("latgovd");
    logger->set_level(spdlog::level::from_str(level));
    spdlog::set_default_logger(logger);
}

void log_warning(const std::string& line) {
    spdlog::warn("{}", line);
}

Result<Config> load_for_daemon(const Options& o) {
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

std::string describe_limit(LatencyLimit limit) {
    if (!limit)
        return "none";
    return *limit == 0 ? "0 us (poll only)" : std::to_string(*limit) + " us";
}

class Daemon {
  public:
    Daemon(Options options, Config config)
        : options_(std::move(options)), config_(std::move(config)), root_(options_.sysroot),
          percpu_(root_, journal_path(), log_warning), global_(root_, log_warning) {}

    int run();

  private:
    std::filesystem::path journal_path() const { return config_.daemon.runtime_dir / "journal"; }
    std::filesystem::path status_path() const { return config_.daemon.runtime_dir / "status.json"; }
    bool rescan();
    std::map<int, std::vector<IdleCost>> costs();
    void calibrate_if_missing();
    void tick(SteadyTime now);
    void apply(const Holds& holds, SteadyTime now);
    void write_status(SteadyTime now);
    void write_metrics(SteadyTime now);
    void reload();
    void shutdown();
    void arm_timer(SteadyTime now);
    void open_io_events();
    void on_io_events(SteadyTime now);
    void watch(int fd);

    Options options_;
    Config config_;
    SysRoot root_;
    PerCpuHolder percpu_;
    GlobalHolder global_;
    Topology topology_;
    std::unique_ptr<Governor> governor_;
    std::optional<IoSampler> sampler_;
    IoSample sample_;
    Holds holds_;
    Fd epoll_, signals_, timer_;
    SteadyTime next_tick_{};
    SteadyTime last_status_{};
    SteadyTime last_watchdog_{};
    std::chrono::microseconds watchdog_interval_{0};
    std::string online_text_;
    SteadyTime last_online_check_{};
    bool status_dirty_ = true;
    std::optional<IoIssueEvents> events_;
    std::string events_state_ = "off";
    // Onset delays (request issued -> constraint written), newest last.
    std::vector<double> onset_us_;
    std::string cost_source_ = "declared";
    SteadyTime last_change_{};
    MetricsRecorder metrics_;
    SteadyTime last_metrics_{};
    bool metrics_failed_ = false;
};

// After this long with the same active queues, sampling slows to
// steady_interval.
constexpr std::chrono::milliseconds steady_after{100};

// While idle with IO events armed, the daemon still wakes this often for
// housekeeping (CPU hotplug check, watchdog): far below 1/s.
constexpr std::chrono::seconds housekeeping_interval{10};

// Measured wake-up costs when a calibration of this very machine exists,
// the kernel's declared exit latencies otherwise.
std::map<int, std::vector<IdleCost>> Daemon::costs() {
    const auto& path = config_.daemon.calibration_file;
    std::optional<Calibration> calibration;
    std::string why;
    if (!std::filesystem::exists(path)) {
        why = "no calibration at " + path.string();
    } else if (auto loaded = load_calibration(path); !loaded) {
        why = "unreadable calibration: " + loaded.error().message;
        spdlog::warn("Failed to load {}: {}; using declared exit latencies", path.string(),
                     loaded.error().message);
    } else if (loaded->machine != read_machine_identity(root_, topology_)) {
        why = "calibration at " + path.string() + " is for another machine or kernel";
        spdlog::warn("{}: recalibrate with `latgov calibrate`", why);
    } else {
        calibration = std::move(*loaded);
    }
    auto result = idle_costs(topology_, calibration ? &*calibration : nullptr, cost_source_);
    if (!calibration)
        cost_source_ = "declared (" + why + ")";
    return result;
}

void Daemon::calibrate_if_missing() {
    if (!config_.daemon.calibrate_on_start ||
        std::filesystem::exists(config_.daemon.calibration_file))
        return;
    spdlog::info("no calibration at {}: measuring idle-state costs (calibrate_on_start)",
                 config_.daemon.calibration_file.string());
    sd_notify(0, "STATUS=Calibrating idle-state costs\nEXTEND_TIMEOUT_USEC=60000000");
    CalibrateOptions options;
    options.runtime_dir = config_.daemon.runtime_dir;
    options.max_time = std::chrono::seconds(20);
    std::atomic<bool> stop{false};
    auto calibration = run_calibration(root_, options, stop);
    if (!calibration) {
        spdlog::warn("Failed to calibrate, using declared exit latencies: {}",
                     calibration.error().message);
        return;
    }
    std::error_code ec;
    std::filesystem::create_directories(config_.daemon.calibration_file.parent_path(), ec);
    std::ofstream out(config_.daemon.calibration_file);
    if (!(out << format_calibration(*calibration)))
        spdlog::warn("Failed to write {}", config_.daemon.calibration_file.string());
}

bool Daemon::rescan() {
    auto topology = discover_topology(root_);
    if (!topology) {
        spdlog::error("Failed to discover topology: {}", topology.error().message);
        return false;
    }
    topology_ = std::move(*topology);
    metrics_.count_rescan();
    for (const auto& w : topology_.warnings)
        spdlog::warn("{}", w);
    governor_ = std::make_unique<Governor>(topology_, config_, costs());
    auto sampler = IoSampler::open(root_, governor_->stat_sources(),
                                   config_.daemon.queue_inflight ? governor_->queue_tags()
                                                                 : std::vector<QueueTags>{});
    if (!sampler && config_.daemon.queue_inflight) {
        spdlog::warn("Failed to open per-queue in-flight counts ({}); using device counts",
                     sampler.error().message);
        sampler = IoSampler::open(root_, governor_->stat_sources());
    }
    if (!sampler) {
        spdlog::error("Failed to open IO statistics: {}", sampler.error().message);
        return false;
    }
    sampler_ = std::move(*sampler);
    auto online = root_.read("/sys/devices/system/cpu/online");
    online_text_ = online ? *online : std::string{};
    spdlog::info("cpuidle driver {}, governor {}; {} online CPUs", topology_.cpuidle_driver,
                 topology_.cpuidle_governor, topology_.online_cpus.size());
    switch (idle_governor_kind(topology_.cpuidle_driver, topology_.cpuidle_governor)) {
    case IdleGovernorKind::none:
        spdlog::warn("no cpuidle driver: CPUs idle in the default idle whatever PM QoS says, "
                     "so auto holds nothing here (fixed limits are still written)");
        break;
    case IdleGovernorKind::zero_only:
        spdlog::info("cpuidle governor {} honours only a limit of 0: auto holds 0 or nothing",
                     topology_.cpuidle_governor);
        break;
    case IdleGovernorKind::latency_aware:
        break;
    }
    if (governor_->devices().empty())
        spdlog::info("no device to govern");
    for (const auto& d : governor_->devices()) {
        std::string queues;
        for (const auto& q : d.queues)
            queues += fmt::format("{}q{}->cpu{}", queues.empty() ? "" : " ", q.index,
                                  format_cpu_list(q.cpus));
        spdlog::info("governing {} (mode {}, backend {}, by {}): {}", d.name,
                     to_string(d.policy.mode), to_string(d.policy.backend), d.rule, queues);
    }
    open_io_events();
    return true;
}

void Daemon::watch(int fd) {
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.fd = fd;
    if (::epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, fd, &ev) != 0)
        spdlog::warn("Failed to watch fd {}: {}", fd, errno_message(errno));
}

void Daemon::open_io_events() {
    events_.reset(); // closing the fds also removes them from epoll
    if (!config_.daemon.io_events) {
        events_state_ = "off (configuration): sampling every idle_interval while idle";
        return;
    }
    if (governor_->devices().empty()) {
        events_state_ = "no device to watch";
        return;
    }
    auto events = IoIssueEvents::open(root_, topology_.online_cpus, governor_->watched_devs());
    if (!events) {
        events_state_ = "unavailable: " + events.error().message;
        spdlog::warn("IO events unavailable ({}); sampling every {} ms while idle instead",
                     events.error().message, config_.daemon.idle_interval.count());
        return;
    }
    events_ = std::move(*events);
    if (epoll_)
        for (int fd : events_->fds())
            watch(fd);
    events_state_ = "sleeping until the first request (block_rq_issue events)";
    spdlog::info("waking on block_rq_issue events while idle");
}

void Daemon::on_io_events(SteadyTime now) {
    if (!events_)
        return;
    std::uint64_t first_ns = 0; // the earliest request that activated a queue
    for (const auto& request : events_->drain())
        if (governor_->on_request_issued(request.dev, request.cpu, now) &&
            (first_ns == 0 || request.time_ns < first_ns))
            first_ns = request.time_ns;
    if (first_ns != 0) {
        apply(governor_->holds(), now);
        last_change_ = now;
        timespec ts{};
        ::clock_gettime(CLOCK_MONOTONIC, &ts); // the clock the events are stamped with
        const auto done_ns = static_cast<std::uint64_t>(ts.tv_sec) * 1000000000u +
                             static_cast<std::uint64_t>(ts.tv_nsec);
        if (done_ns >= first_ns) {
            if (onset_us_.size() >= 1000)
                onset_us_.erase(onset_us_.begin());
            onset_us_.push_back(static_cast<double>(done_ns - first_ns) / 1000.0);
            metrics_.observe_onset(static_cast<double>(done_ns - first_ns) / 1e9);
        }
    }
    // Only once the constraint is written: disarming costs a call per CPU.
    // From here sampling follows the IO; the events would only cost.
    events_->disarm();
    events_->drain();
}

void Daemon::apply(const Holds& holds, SteadyTime now) {
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

void Daemon::write_status(SteadyTime now) {
    StatusInput input{*governor_, holds_, percpu_, global_, topology_, cost_source_, now};
    auto status = build_status(input);
    status["io_events"] = events_state_;
    nlohmann::ordered_json onset = {{"count", onset_us_.size()}};
    if (!onset_us_.empty()) {
        auto sorted = onset_us_;
        std::sort(sorted.begin(), sorted.end());
        auto at = [&](double q) {
            return sorted[static_cast<size_t>(q * static_cast<double>(sorted.size() - 1))];
        };
        onset["p50_us"] = at(0.5);
        onset["p99_us"] = at(0.99);
        onset["max_us"] = sorted.back();
    }
    status["onset_delay"] = std::move(onset);
    if (auto written = latgov::write_status(status_path(), status); !written)
        spdlog::warn("{}", written.error().message);
    last_status_ = now;
    status_dirty_ = false;
    write_metrics(now);
}

// The metrics follow the status writes, and are refreshed every
// metrics_refresh while idle so a scrape can tell a live daemon from a
// stale file.
constexpr std::chrono::seconds metrics_refresh{30};

void Daemon::write_metrics(SteadyTime now) {
    const auto& path = config_.daemon.metrics_file;
    if (path.empty() || (!config_.daemon.metrics_file_configured &&
                         !std::filesystem::is_directory(path.parent_path())))
        return;
    last_metrics_ = now;
    MetricsRecorder::Inputs in{*governor_,          holds_, percpu_, global_, topology_,
                               events_.has_value(), now};
    if (auto written = write_metrics_file(path, format_metrics(metrics_.snapshot(in))); !written) {
        if (!metrics_failed_)
            spdlog::warn("{}", written.error().message);
        metrics_failed_ = true;
    } else {
        metrics_failed_ = false;
    }
}

void Daemon::tick(SteadyTime now) {
    // CPU hotplug moves managed IRQs: a changed online set means a new map.
    if (now - last_online_check_ >= std::chrono::seconds(5)) {
        last_online_check_ = now;
        auto online = root_.read("/sys/devices/system/cpu/online");
        if (online && *online != online_text_) {
            spdlog::info("online CPUs changed to {}, rescanning", trim(*online));
            rescan();
        }
    }
    if (auto sampled = sampler_->sample(sample_); !sampled) {
        // A device went away (or a controller reset): map the machine anew;
        // a failed rescan is retried at the next tick.
        spdlog::warn("{}; rescanning devices", sampled.error().message);
        rescan();
        return;
    }
    if (governor_->observe(sample_, now)) {
        apply(governor_->holds(), now);
        last_change_ = now;
    }
    // At most one status write per status_interval: the file may live on a
    // disk latgov governs, and every write there is IO it would react to.
    if ((status_dirty_ || governor_->any_active()) &&
        now - last_status_ >= config_.daemon.status_interval)
        write_status(now);
    if (now - last_metrics_ >= metrics_refresh)
        write_metrics(now);
    if (watchdog_interval_.count() > 0 && now - last_watchdog_ >= watchdog_interval_ / 2) {
        sd_notify(0, "WATCHDOG=1");
        last_watchdog_ = now;
    }
}

void Daemon::arm_timer(SteadyTime now) {
    const bool active = governor_ && governor_->any_active();
    std::chrono::milliseconds interval =
        active ? config_.daemon.sample_interval : config_.daemon.idle_interval;
    if (active && now - last_change_ >= steady_after)
        interval = std::max(config_.daemon.sample_interval, config_.daemon.steady_interval);
    if (!active && events_ && !events_->armed()) {
        if (auto armed = events_->arm(); !armed) {
            spdlog::warn("{}; sampling while idle instead", armed.error().message);
            events_state_ = "unavailable: " + armed.error().message;
            events_.reset();
        }
    }
    if (!active && events_) {
        // The first request wakes us: the timer is only for housekeeping.
        interval = housekeeping_interval;
        if (watchdog_interval_.count() > 0)
            interval = std::min(
                interval,
                std::chrono::duration_cast<std::chrono::milliseconds>(watchdog_interval_) / 2);
    }
    // Deadlines advance by whole periods from the last one, so ticks do not
    // drift; a missed period is skipped, not caught up.
    next_tick_ += interval;
    if (next_tick_ <= now)
        next_tick_ = now + interval;
    SteadyTime deadline = next_tick_;
    // A status change still to be written is flushed on time.
    if (status_dirty_)
        deadline = std::min(deadline, std::max(now, last_status_ + config_.daemon.status_interval));
    const auto ns =
        std::chrono::duration_cast<std::chrono::nanoseconds>(deadline.time_since_epoch()).count();
    itimerspec spec{};
    spec.it_value.tv_sec = static_cast<time_t>(ns / 1000000000);
    spec.it_value.tv_nsec = static_cast<long>(ns % 1000000000);
    ::timerfd_settime(timer_.get(), TFD_TIMER_ABSTIME, &spec, nullptr);
}

void Daemon::reload() {
    sd_notifyf(
        0, "RELOADING=1\nSTATUS=Reloading configuration\nMONOTONIC_USEC=%llu",
        static_cast<unsigned long long>(std::chrono::duration_cast<std::chrono::microseconds>(
                                            std::chrono::steady_clock::now().time_since_epoch())
                                            .count()));
    auto config = load_for_daemon(options_);
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
    rescan();
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
}

int Daemon::run() {
    spdlog::default_logger()->sinks().push_back(metrics_.log_counter());
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
    if (auto topology = discover_topology(root_); topology) {
        topology_ = std::move(*topology);
        calibrate_if_missing();
    }
    if (!rescan())
        return 1;
    spdlog::info("idle-state costs: {}", cost_source_);
    fmt::print(stderr, "{}", format_topology_table(topology_));

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
    if (events_)
        for (int fd : events_->fds())
            watch(fd);
    std::uint64_t watchdog_usec = 0;
    if (sd_watchdog_enabled(0, &watchdog_usec) > 0)
        watchdog_interval_ = std::chrono::microseconds(watchdog_usec);

    auto now = std::chrono::steady_clock::now();
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
                        reload();
                        now = std::chrono::steady_clock::now();
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
            } else if (events_) {
                now = std::chrono::steady_clock::now();
                on_io_events(now);
                next_tick_ = now; // sample from here on, one period after the wake
                arm_timer(now);
            }
        }
    }
}

} // namespace

int daemon_main(int argc, char** argv) {
    auto options = parse_options(argc, argv);
    if (!options)
        return 2;
    auto config = load_for_daemon(*options);
    if (options->check_config) {
        if (!config) {
            fmt::print(stderr, "{}\n", config.error().message);
            return 1;
        }
        fmt::print("configuration OK ({})\n", config->sources.empty()
                                                  ? std::string("embedded default")
                                                  : config->sources.front().string());
        return 0;
    }
    setup_logging(config ? config->daemon.log_level : "info");
    if (options->restore) {
        const auto runtime =
            config ? config->daemon.runtime_dir : options->runtime_dir.value_or("/run/latgov");
        SysRoot root(options->sysroot);
        if (auto restored = restore_journal(root, runtime / "journal", log_warning); !restored) {
            spdlog::error("{}", restored.error().message);
            return 1;
        }
        return 0;
    }
    if (!config) {
        spdlog::error("{}", config.error().message);
        sd_notifyf(0, "STATUS=Bad configuration: %s", config.error().message.c_str());
        return exit_config;
    }
    Daemon daemon(std::move(*options), std::move(*config));
    return daemon.run();
}

} // namespace latgov
