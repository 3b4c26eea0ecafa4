#include "daemon.hpp"

#include "calibrate_on_start.hpp"
#include "evidence.hpp"
#include "latgov/config_file.hpp"
#include "latgov/discovery.hpp"
#include "latgov/replace_file.hpp"
#include "latgov/schedule.hpp"
#include "latgov/status.hpp"
#include "latgov/topology_json.hpp"
#include "logging.hpp"
#include "runtime_setup.hpp"

#include <algorithm>
#include <array>
#include <csignal>
#include <cstring>
#include <exception>
#include <linux/magic.h>
#include <optional>
#include <sched.h>
#include <spdlog/spdlog.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/signalfd.h>
#include <sys/statfs.h>
#include <systemd/sd-daemon.h>
#include <time.h>
#include <utility>

namespace latgov {

namespace {

// A failed rescan (a device mid-reset, a controller going away) is retried
// after this, doubling up to max_rescan_retry; the current state governs
// meanwhile. So are a new map that cannot be sampled and a device's
// statistics that could not be opened.
constexpr std::chrono::milliseconds first_rescan_retry{100};
constexpr std::chrono::milliseconds max_rescan_retry{5000};

constexpr Backoff retry_backoff() {
    return {first_rescan_retry, max_rescan_retry};
}

// The metrics follow the status writes, and are refreshed this often while
// idle so a scrape can tell a live daemon from a stale file.
constexpr std::chrono::seconds metrics_refresh{30};
// How often the CPUs with a journal record latgov does not hold are read for
// another writer's value (PerCpuHolder::check_records), IO or not; an idle
// daemon with IO events armed wakes every housekeeping_interval, which sets
// the pace then.
constexpr std::chrono::seconds record_check_interval{1};
// The epoll events one wait takes; more wait for the next.
constexpr std::size_t max_events_per_wait = 16;

double unix_time_now() {
    return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch())
        .count();
}

std::chrono::nanoseconds clock_now(clockid_t clock) {
    timespec ts{};
    ::clock_gettime(clock, &ts);
    return std::chrono::seconds(ts.tv_sec) + std::chrono::nanoseconds(ts.tv_nsec);
}

// The time the host was suspended since boot (suspended_time); nullopt when
// the thread was preempted while reading the clocks, each of a few tries.
std::optional<std::chrono::nanoseconds> suspended_so_far() {
    for (int attempt = 0; attempt < 3; ++attempt) {
        const auto mono_before = clock_now(CLOCK_MONOTONIC);
        const auto boot = clock_now(CLOCK_BOOTTIME);
        if (auto t = suspended_time(mono_before, boot, clock_now(CLOCK_MONOTONIC)))
            return t;
    }
    return std::nullopt;
}

// The online CPUs as discovery reads them, to compare with the governed
// topology's.
constexpr std::string_view online_cpus_file = "/sys/devices/system/cpu/online";
Result<CpuSet> read_online_cpus(const SysRoot& root) {
    auto text = root.read(online_cpus_file);
    if (!text)
        return text.error();
    auto cpus = parse_cpu_list(*text);
    if (!cpus)
        return make_error(fmt::format("Failed to parse {}: {}",
                                      root.resolve(online_cpus_file).string(),
                                      cpus.error().message));
    return cpus;
}

std::uint64_t monotonic_ns() { // the clock the events are stamped with
    timespec ts{};
    ::clock_gettime(CLOCK_MONOTONIC, &ts);
    const auto since_boot = std::chrono::seconds(ts.tv_sec) + std::chrono::nanoseconds(ts.tv_nsec);
    return static_cast<std::uint64_t>(since_boot.count());
}

// Taken by the loop's signalfd, blocked everywhere else.
sigset_t daemon_signals() {
    sigset_t mask;
    sigemptyset(&mask);
    for (int sig : {SIGINT, SIGTERM, SIGHUP})
        sigaddset(&mask, sig);
    return mask;
}

// Fails only when the counter would overflow: the loop reads it first.
void wake_loop(const Fd& wake) {
    const std::uint64_t one = 1;
    (void)!::write(wake.get(), &one, sizeof one);
}

} // namespace

void block_daemon_signals() {
    const sigset_t mask = daemon_signals();
    sigprocmask(SIG_BLOCK, &mask, nullptr);
}

Result<Config> load_daemon_config(const Options& o) {
    auto config = load_config(o.config, o.config_given);
    if (!config)
        return config;
    if (o.runtime_dir)
        config->daemon.runtime_dir = *o.runtime_dir;
    if (o.metrics_file) {
        config->daemon.metrics_file = *o.metrics_file;
        config->daemon.metrics_file_configured = true;
    }
    if (o.dry_run) {
        config->defaults.backend = Backend::dry_run;
        for (auto& rule : config->devices)
            rule.backend.reset();
    }
    return config;
}

Daemon::Daemon(Options options, Config config)
    : options_(std::move(options)), config_(std::move(config)), root_(options_.sysroot),
      percpu_(root_, journal_path(), log_warning, !options_.dry_run), global_(root_, log_warning),
      rescan_retry_(retry_backoff()), sample_retry_(retry_backoff()),
      reopen_retry_(retry_backoff()), metrics_(unix_time_now()) {}

Daemon::~Daemon() {
    // The kick threads stop with the kicker, after members they would use.
    std::lock_guard lock(gate_->mutex);
    gate_->open = false;
}

bool Daemon::rescan(TimePoint now, RescanCause cause, std::optional<Topology> discovered) {
    auto state = discovered
                     ? build_governed_state(root_, config_, std::move(*discovered), state_.get())
                     : build_governed_state(root_, config_, state_.get());
    if (!state) {
        // The current map keeps governing meanwhile. Where a sample that
        // failed brought this rescan, nothing is observed and nothing held
        // (the failed sample released it).
        const auto retry = rescan_retry_.next();
        spdlog::error("{}; keeping the current map, retrying in {} ms", state.error().message,
                      retry.count());
        next_rescan_ = now + retry;
        failed_rescan_ = cause;
        return false;
    }
    install(std::move(*state), now, cause);
    return true;
}

std::optional<TimePoint> Daemon::rescan_at() const {
    auto at = burst_rescan_at(uevent_burst_, next_rescan_);
    if (auto hotplug = burst_rescan_at(hotplug_burst_, next_rescan_);
        hotplug && (!at || *hotplug < *at))
        at = hotplug;
    if (failed_rescan_ && (!at || next_rescan_ < *at))
        at = next_rescan_;
    return at;
}

void Daemon::install(GovernedState state, TimePoint now, RescanCause cause) {
    if (state_)
        count_windows(); // the new governor counts from 0
    counted_hits_ = counted_misses_ = 0;
    if (state_)
        unwatch_events(); // the old events close here
    if (state_ && state.topology.online_cpus != state_->topology.online_cpus)
        spdlog::info("online CPUs changed to {}", format_cpu_list(state.topology.online_cpus));
    state_ = std::make_unique<GovernedState>(std::move(state));
    metrics_.count_rescan(cause);
    rescan_retry_.reset();
    next_rescan_ = {};
    failed_rescan_.reset();
    reopen_retry_.reset();
    next_reopen_ = now + reopen_retry_.next();
    reopened_.clear(); // the new governor's first sample is its baseline
    // Every uevent read so far came before this discovery (one thread), so
    // the new state has seen what they announced.
    uevent_burst_ = {};
    hotplug_burst_ = {}; // the same for the hotplug steps: this map came after them
    fingerprint_ = topology_fingerprint(state_->topology);
    next_periodic_check_ = now + periodic_check_interval;
    last_online_check_ = now;
    boot_offset_ = suspended_so_far(); // none: the first check takes it
    start_kicker();
    spdlog::info("topology scanned ({})", to_string(cause));
    log_governed_state(*state_, config_);
    watch_events();
    watch_hotplug(state_->topology.online_cpus, now);
    // The new governor starts idle: what the old one held is released.
    apply(state_->governor.holds(), now);
    holds_dropped_ = false;
    status_dirty_ = true;
}

void Daemon::start_kicker() {
    const auto& cpus = state_->topology.online_cpus;
    if (!root_.is_live())
        return;
    const std::string refused_before = kicker_ ? kicker_->refused() : std::string{};
    if (kicker_) {
        // Also with the same CPUs: one may have gone offline and come back.
        kicker_->update(cpus); // only the threads of CPUs that came or went
    } else {
        // Entered from a kick thread whenever its CPU's IO events are ready.
        auto kicker = CpuKicker::start(cpus, [this, gate = gate_](int) noexcept {
            bool wake = false;
            {
                std::lock_guard lock(gate->mutex);
                wake = gate->open && on_cpu_io_ready();
            }
            // After the unlock, so that the loop does not wake into the
            // lock; through the gate, which outlives the daemon.
            if (wake)
                wake_loop(gate->wake);
        });
        if (!kicker) {
            spdlog::warn("{}; a CPU constrained while idle keeps its idle state until its "
                         "next interrupt",
                         kicker.error().message);
            return;
        }
        kicker_ = std::move(*kicker);
    }
    if (!kicker_->refused().empty() && kicker_->refused() != refused_before)
        spdlog::warn("No thread to wake cpu {} (a cpuset narrower than the online CPUs?): "
                     "constrained while idle, it keeps its idle state until its next interrupt",
                     kicker_->refused());
}

bool Daemon::watch(int fd, std::string_view what) {
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.fd = fd;
    if (::epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, fd, &ev) == 0)
        return true;
    spdlog::warn("Failed to watch {} (fd {}): {}", what, fd, errno_message(errno));
    return false;
}

void Daemon::unwatch_events() {
    // Out of every epoll before they close: a closed fd leaves an epoll
    // only when no copy of its file is left (a process that took one with
    // pidfd_getfd, say), and an event left there that fires would wake the
    // loop in a spin, since nothing drains it.
    if (!state_->events)
        return;
    for (const auto& [cpu, fd] : state_->events->fds()) {
        if (kicker_)
            kicker_->unwatch(cpu, fd);
        // ENOENT where the CPU's kick thread watched it: never in this epoll.
        (void)::epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, fd, nullptr);
    }
}

void Daemon::watch_events() {
    if (!state_->events)
        return;
    // Not both: the kernel wakes every waiter of an event, and a perf event
    // polls readable once per wake-up, so the first to poll takes it, and
    // may then run late. Measured on the test host of docs/design.md (two
    // CPUs, no cpuidle driver), reads from one CPU, the loop kept on the
    // other, 5 interleaved rounds of 40 onsets:
    // the CPU's thread alone, onset p99 368-702 us; both watching, the loop
    // took 13-20 of each 40, and p99 was 572-3900 us. The cost: a CPU kept
    // busy by a real-time task that does not sleep after it issues IO
    // holds nothing for it until the task yields.
    for (const auto& [cpu, fd] : state_->events->fds())
        if (!kicker_ || !kicker_->watch(cpu, fd))
            watch(fd, fmt::format("the IO events of cpu {} (its first request after idle is "
                                  "seen at the next tick)",
                                  cpu));
}

void Daemon::watch_hotplug(const std::vector<int>& cpus, TimePoint now) {
    if (uevents_ || !root_.is_live())
        return;
    // The new watch opens before the old one closes, and a step the old one
    // caught by then (after the discovery of the map just installed, maybe)
    // is rescanned, like a CPU already gone when the new one opened: no
    // step falls between the two.
    auto opened = HotplugWatch::open(root_, cpus);
    bool caught = opened && !opened->missed().empty();
    if (hotplug_) {
        caught = hotplug_->drain() || caught;
        for (int fd : hotplug_->fds())
            (void)::epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, fd, nullptr);
        hotplug_.reset();
    }
    if (caught)
        hotplug_burst_ = add_change(hotplug_burst_, now);
    if (!opened) {
        // Said once, not at every rescan of a failure that lasts.
        spdlog::log(hotplug_unwatched_ ? spdlog::level::debug : spdlog::level::warn,
                    "{}; with no uevents either, a CPU that goes offline and comes back between "
                    "two online checks is not seen, and its IO events stay dead until another "
                    "rescan",
                    opened.error().message);
        hotplug_unwatched_ = true;
        return;
    }
    hotplug_ = std::move(*opened);
    for (int fd : hotplug_->fds()) {
        if (!watch(fd, "a CPU hotplug event (a CPU offline and back between two online checks "
                       "goes unseen)")) {
            for (int added : hotplug_->fds())
                (void)::epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, added, nullptr);
            hotplug_.reset();
            hotplug_unwatched_ = true;
            return;
        }
    }
    hotplug_unwatched_ = false;
}

void Daemon::on_hotplug(TimePoint now) {
    if (!hotplug_->drain())
        return;
    spdlog::debug("CPU hotplug steps seen");
    hotplug_burst_ = add_change(hotplug_burst_, now);
}

void Daemon::on_io_ready(TimePoint now) {
    if (!sampling_error_.empty()) {
        // Fired before the devices could no longer be sampled: nothing is
        // held now, and schedule_wake disarms what is still armed.
        (void)state_->events->drain();
        schedule_wake(now);
        return;
    }
    // Sample from an onset on (a request activated a queue), one period
    // after it. A request on a queue already active keeps the period: the
    // tick moves at most once per queue between two ticks.
    if (on_io_events(now))
        cadence_.restart(now);
    schedule_wake(now);
}

bool Daemon::on_cpu_io_ready() noexcept {
    try {
        if (state_ && state_->events)
            on_io_ready(std::chrono::steady_clock::now());
        return wake_at_ < loop_waits_until_;
    } catch (...) {
        // Anything, or the thread ends the process with the limits held:
        // the loop rethrows it, and releases every constraint.
        cpu_thread_failed_ = std::current_exception();
        gate_->open = false;
        return true;
    }
}

void Daemon::take_recorded_requests() {
    if (!state_->recorder || !state_->recorder->any_armed())
        return;
    auto requests = state_->recorder->drain(); // CPU by CPU: put in time order
    std::sort(requests.begin(), requests.end(),
              [](const auto& a, const auto& b) { return a.time_ns < b.time_ns; });
    for (const auto& request : requests)
        if (request.waited.value_or(true)) // as on_request_issued
            state_->governor.on_recorded_request(
                request.dev, request.cpu, TimePoint{std::chrono::nanoseconds(request.time_ns)});
}

void Daemon::count_windows() {
    const auto& periodic = state_->governor.periodic();
    metrics_.count_windows(periodic.hits() - counted_hits_, periodic.misses() - counted_misses_);
    counted_hits_ = periodic.hits();
    counted_misses_ = periodic.misses();
}

std::chrono::milliseconds Daemon::window_slack() const {
    return std::chrono::milliseconds(have_epoll_pwait2_ ? 0 : 1);
}

void Daemon::open_window(TimePoint now) {
    // No sampling here: the hold must be written before the request, and
    // reading every counter would take as long as the lead. A request
    // recorded already (it came early) leaves nothing to wait for.
    take_recorded_requests();
    if (!state_->governor.prearm(now + window_slack()))
        return;
    apply(state_->governor.holds(), now);
    state_->governor.prearm_written(std::chrono::steady_clock::now());
    const auto us = [](auto d) { return std::chrono::duration_cast<std::chrono::microseconds>(d); };
    if (auto period = state_->governor.periodic().period())
        spdlog::debug("pre-armed for a periodic request (every {} us, spread {} us, lead {} us)",
                      us(period->period).count(), us(period->spread).count(),
                      us(state_->governor.periodic().lead()).count());
    last_change_ = now;
    cadence_.restart(now); // sampled from here on, as from an onset
}

bool Daemon::on_io_events(TimePoint now) {
    auto& events = state_->events;
    if (!events)
        return false;
    const std::uint64_t woken_ns = monotonic_ns();
    bool activated = false; // a request activated a queue
    std::vector<int> fired; // the CPUs whose events fired
    // The requests of `requests` that activated a queue.
    auto take = [&](const std::vector<IssuedRequest>& requests) {
        std::vector<IssuedRequest> activating;
        for (const auto& request : requests) {
            fired.push_back(request.cpu);
            const TimePoint issued{std::chrono::nanoseconds(request.time_ns)}; // CLOCK_MONOTONIC
            if (state_->governor.on_request_issued(request.dev, request.cpu, now, request.waited,
                                                   issued))
                activating.push_back(request);
        }
        std::sort(fired.begin(), fired.end());
        fired.erase(std::unique(fired.begin(), fired.end()), fired.end());
        return activating;
    };
    // Writes what changed: a queue activated, or a waiter seen first. The
    // write's time is taken at once, so that an onset ends at the limit,
    // not at the kicks; then the CPUs held anew are woken, and only then is
    // the request that waited for it worked out.
    std::vector<LimitWrite> writes; // this wake-up's, one per drain
    auto settle = [&](std::vector<IssuedRequest> activating, bool first_drain) {
        const Tightened tightened = apply(state_->governor.holds(), now, false);
        writes.push_back({tightened, monotonic_ns()});
        kick_held_anew();
        if (activating.empty())
            return;
        // After the holds and kicks, which the request may wait for, and
        // before the disarm: a request issued after it is counted from
        // here, or drained as company by the rounds below.
        read_onset_baselines(*state_);
        if (first_drain && spdlog::should_log(spdlog::level::debug)) {
            std::uint64_t first_ns = activating.front().time_ns;
            for (const auto& request : activating)
                first_ns = std::min(first_ns, request.time_ns);
            spdlog::debug("woken by a request issued at {} ns", first_ns);
        }
        activated = true;
        last_change_ = now;
        record_onset(std::move(activating), writes, woken_ns);
    };
    settle(take(events->drain()), true);
    // Only once the constraint is written: disabling interrupts each CPU.
    // From here sampling follows the IO on these CPUs; their events would
    // only cost. Requests that came meanwhile (from these CPUs before the
    // disable, or from CPUs still armed) are taken too, and timed as the
    // first ones, until none is left: each round disables the CPUs it saw,
    // so it ends (bounded all the same, should a CPU's event refuse to be
    // disabled).
    const size_t rounds = 2 * events->fds().size() + 1;
    for (size_t round = 0; round < rounds; ++round) {
        if (auto disarmed = events->disarm(fired); !disarmed)
            spdlog::warn("{}", disarmed.error().message);
        auto more = events->drain();
        if (more.empty())
            break;
        settle(take(more), false);
    }
    return activated;
}

void Daemon::record_onset(std::vector<IssuedRequest> activating,
                          const std::vector<LimitWrite>& writes, std::uint64_t woken_ns) {
    const auto onset = find_onset(
        std::move(activating), writes,
        [this](const IssuedRequest& r) { return state_->governor.onset_needs(r.dev, r.cpu); },
        woken_ns);
    if (!onset)
        return;
    spdlog::debug("a request issued at {} ns waited {} us for its constraint",
                  onset->request.time_ns, onset->delay.count() / 1000);
    onset_.record(onset->delay, ::sched_getcpu() == onset->request.cpu);
    metrics_.observe_onset(std::chrono::duration<double>(onset->delay).count()); // seconds
    onset_wake_.record(onset->wake);
    onset_work_.record(onset->work);
}

Tightened Daemon::apply(const Holds& holds, TimePoint now, bool kick) {
    std::map<int, LatencyLimit> wanted;
    for (const auto& [cpu, hold] : holds.percpu)
        wanted[cpu] = hold.limit;
    const auto percpu_changes = diff_holds(holds_.percpu, holds.percpu);
    const auto dry_run_changes = diff_holds(holds_.dry_run, holds.dry_run);
    // The descriptions are strings: built only for a line that is logged.
    if (spdlog::should_log(spdlog::level::debug)) {
        for (const auto& change : percpu_changes)
            spdlog::debug("cpu {}: {} -> {}", change.cpu, describe_limit(change.from),
                          describe_limit(change.to));
        if (holds.global != holds_.global)
            spdlog::debug("global: {} -> {}", describe_limit(holds_.global),
                          describe_limit(holds.global));
    }
    for (const auto& change : dry_run_changes)
        spdlog::info("dry-run: cpu {} would go {} -> {}", change.cpu, describe_limit(change.from),
                     describe_limit(change.to));
    const bool changed =
        !percpu_changes.empty() || holds.global != holds_.global || !dry_run_changes.empty();
    if (changed)
        status_dirty_ = true;
    Tightened tightened;
    const std::uint64_t mark = percpu_.writes();
    percpu_.apply(wanted, now);
    tightened.cpus = percpu_.tightened_since(mark);
    held_anew_.insert(held_anew_.end(), tightened.cpus.begin(), tightened.cpus.end());
    for (const auto& change : dry_run_changes) // in CPU order
        if (stricter(change.to, change.from))
            tightened.dry_run_cpus.push_back(change.cpu);
    if (kick)
        kick_held_anew();
    metrics_.observe_percpu(percpu_.held(), now);
    const LatencyLimit global_before = global_.held();
    global_.apply(holds.global, now);
    tightened.global = stricter(global_.held(), global_before);
    holds_ = holds;
    return tightened;
}

void Daemon::kick_held_anew() {
    if (kicker_) {
        // This CPU chooses its idle state again anyway when latgovd sleeps.
        const int here = ::sched_getcpu();
        for (int cpu : held_anew_)
            if (cpu != here)
                kicker_->kick(cpu);
    }
    held_anew_.clear();
}

StatusInput Daemon::status_input(TimePoint now) const {
    return {state_->governor,
            holds_,
            percpu_,
            global_,
            state_->topology,
            state_->cost_source,
            io_events_state(),
            onset_.summary(),
            onset_wake_.summary(),
            onset_work_.summary(),
            now,
            sampling_error_};
}

std::string Daemon::io_events_state() const {
    if (!state_->events || !isolated_)
        return state_->events_state;
    return fmt::format(
        "{}; paused: the last {} requests after idle came alone, so idle IO is "
        "sampled every {} ms until requests come closer together (less than {} ms apart, or the "
        "device's linger where longer){}",
        state_->events_state, Governor::isolated_after, config_.daemon.idle_interval.count(),
        stream_gap.count(),
        state_->recorder ? "; a recorder times them, and those at a steady period are held for "
                           "ahead (prearm)"
                         : "");
}

void Daemon::notify_state(const char* also) const {
    auto state = sampling_error_.empty()
                     ? std::string("Governing")
                     : fmt::format("Not governing, nothing held: {}", sampling_error_);
    // One line: a newline (in text quoted from a file) would start another
    // assignment of the message.
    std::replace(state.begin(), state.end(), '\n', ' ');
    sd_notifyf(0, "%sSTATUS=%s", also, state.c_str());
}

void Daemon::write_status(TimePoint now) {
    if (runtime_) {
        // A failure that lasts (a full /run) is said once, not at every
        // write while IO runs, and so is its end.
        auto written = latgov::write_status(*runtime_, build_status(status_input(now)));
        if (!written) {
            const auto& why = written.error().message;
            spdlog::log(status_failing_ ? spdlog::level::debug : spdlog::level::warn, "{}{}", why,
                        status_failing_ ? "" : "; not said again until a status is written");
            status_failing_ = true;
        } else if (status_failing_) {
            spdlog::info("status written again");
            status_failing_ = false;
        }
    }
    last_status_ = now;
    status_dirty_ = false;
    status_shows_activity_ = sampling_error_.empty() && state_ && state_->governor.any_active();
    queue_metrics(now);
}

void Daemon::queue_metrics(TimePoint now) {
    const auto& path = config_.daemon.metrics_file;
    // Checked again at the next refresh, not at every tick: node_exporter's
    // directory may appear later.
    last_metrics_ = now;
    // --dry-run writes no file; the default file only where node_exporter's
    // directory can be seen.
    std::error_code ec;
    if (options_.dry_run || path.empty() ||
        (!config_.daemon.metrics_file_configured &&
         !std::filesystem::is_directory(path.parent_path(), ec)))
        return;
    const auto snapshot =
        metrics_.snapshot(status_input(now), state_->events_kind, logged_counts());
    metrics_to_write_ = PendingMetrics{path, format_metrics(snapshot)};
}

// --dry-run wrote none, and leaves a running daemon's file alone.
void Daemon::remove_metrics_file() {
    metrics_to_write_.reset(); // nor is it written again
    if (config_.daemon.metrics_file.empty() || options_.dry_run)
        return;
    std::error_code ec;
    std::filesystem::remove(config_.daemon.metrics_file, ec);
}

void Daemon::tick(TimePoint now) {
    cadence_.ran(now);
    // Fed first: a tick that cannot sample still shows the loop is alive.
    feed_watchdog(now);
    bool rescanned = false;
    if (auto sampled = sample_or_rescan(now, rescanned); !sampled) {
        cannot_sample(now, sampled.error().message, rescanned);
        return;
    }
    sample_retry_.reset();
    observe_sample(now, rescanned);
    queue_evidence_save();
    housekeeping(now);
}

void Daemon::feed_watchdog(TimePoint now) {
    if (watchdog_interval_.count() > 0 &&
        now - last_watchdog_ >= watchdog_feed_period(watchdog_interval_)) {
        sd_notify(0, "WATCHDOG=1");
        last_watchdog_ = now;
    }
}

Result<void> Daemon::sample_or_rescan(TimePoint now, bool& rescanned) {
    // A rescan that made a new map this tick is not made again below.
    rescanned = rescan_if_due(now);
    if (!rescanned)
        reopen_left_out(now);
    auto sampled = state_->sampler.sample(sample_);
    if (!sampled && !rescanned && now >= next_rescan_) {
        // A device went away (or a controller reset): map the machine anew.
        // Said once, not at every try of a failure that lasts.
        spdlog::log(sampling_error_.empty() ? spdlog::level::warn : spdlog::level::debug,
                    "{}; rescanning devices", sampled.error().message);
        rescanned = rescan(now, RescanCause::device_error);
        if (rescanned)
            sampled = state_->sampler.sample(sample_);
    }
    return sampled;
}

void Daemon::observe_sample(TimePoint now, bool rescanned) {
    // Back from a span nothing observed, on the same map: its counters
    // start again from here.
    const bool rebase = !sampling_error_.empty() && !rescanned;
    if (!reopened_.empty()) {
        state_->governor.rebase_stats(sample_, reopened_);
        reopened_.clear();
    }
    if (!sampling_error_.empty()) {
        spdlog::info("sampling again");
        sampling_error_.clear();
        status_dirty_ = true;
        notify_state();
    }
    read_issue_counters(*state_, sample_);
    take_recorded_requests();
    const bool log_windows = spdlog::should_log(spdlog::level::debug);
    const auto windows_before =
        log_windows ? window_counts(state_->governor) : std::vector<std::uint64_t>{};
    const bool events_armed = state_->events && state_->events->armed();
    bool changed = false;
    if (rebase)
        state_->governor.rebase(sample_, now);
    else
        changed = state_->governor.observe(sample_, now, events_armed);
    active_samples_ = state_->governor.any_active() ? active_samples_ + 1 : 0;
    io_may_be_own_ = std::max(last_status_, last_metrics_) >= last_sample_at_;
    last_sample_at_ = now;
    // Holds dropped while nothing could be observed are taken again.
    if (changed || holds_dropped_) {
        apply(state_->governor.holds(), now);
        holds_dropped_ = false;
        last_change_ = now;
    }
    if (log_windows)
        log_finished_windows(state_->governor, windows_before);
    count_windows();
}

void Daemon::queue_evidence_save() {
    if (note_evidence_changes(state_->governor)) {
        status_dirty_ = true;
        evidence_unsaved_ = !options_.dry_run; // --dry-run writes no file
    }
    if (evidence_unsaved_ && !state_->governor.any_active()) {
        evidence_to_save_ = {state_->governor.evidence(), config_.daemon.evidence_file};
        evidence_unsaved_ = false;
    }
}

bool Daemon::status_due() const {
    if (status_dirty_)
        return true;
    const bool active = sampling_error_.empty() && state_->governor.any_active();
    if (state_->governor.can_hold())
        // While a queue is active, every status_interval; once more when
        // none is, whether or not a hold went with it (schedule_wake wakes
        // for it).
        return active || status_shows_activity_;
    // Nothing can be held (no cpuidle driver): the counters alone tell
    // activity, and a status or metrics write's own IO on a governed disk
    // (the metrics file in node_exporter's directory, a runtime directory
    // not on tmpfs) shows as activity at the next sample. So activity is
    // written from a sample that no such write preceded (or the second of
    // two in a row that saw IO, which one write's IO does not make), and a
    // queue listed active is listed idle again once it is: a write skips
    // at least the sample after it, and the chain of a write, its IO, and
    // another write ends there.
    if (!active)
        return status_shows_activity_;
    return !io_may_be_own_ || (!status_shows_activity_ && active_samples_ >= 2);
}

void Daemon::housekeeping(TimePoint now) {
    flush_log(); // what the journal stream had no room for at the time
    // At most one status write per status_interval: the file may live on a
    // disk latgov governs, and every write there is IO it would react to.
    // Left dirty, it would wake the loop at once.
    if (status_due() && now - last_status_ >= config_.daemon.status_interval)
        write_status(now);
    if (now - last_metrics_ >= metrics_refresh)
        queue_metrics(now);
    if (now - last_record_check_ >= record_check_interval) {
        percpu_.check_records();
        retry_failed_holds(now);
        last_record_check_ = now;
    }
}

void Daemon::retry_failed_holds(TimePoint now) {
    // apply() writes when the wanted limits change, and they may not for a
    // whole burst of IO: a hold that failed (a journal not taken over yet
    // or that could not be written, a CPU file that could not be read or
    // written, /dev/cpu_dma_latency that could not be opened) is tried
    // again here, and so is a held CPU that could not be tightened. A CPU
    // left alone on purpose (someone else's value, one already as strict)
    // costs a read.
    const auto& held = percpu_.held();
    const auto& yielded = percpu_.yielded();
    const bool short_of_percpu =
        std::any_of(holds_.percpu.begin(), holds_.percpu.end(), [&](const auto& wanted) {
            const auto& [cpu, hold] = wanted;
            if (!hold.limit || yielded.count(cpu))
                return false;
            const auto it = held.find(cpu);
            return it == held.end() || it->second.written != hold.limit;
        });
    if (short_of_percpu || global_.held() != holds_.global)
        apply(holds_, now);
}

void Daemon::cannot_sample(TimePoint now, const std::string& why, bool fresh_map) {
    if (fresh_map) {
        // A map made just now cannot be sampled either (text this build
        // cannot read, say): the next rescan waits, longer each time.
        const auto retry = sample_retry_.next();
        next_rescan_ = now + retry;
        spdlog::log(why != sampling_error_ ? spdlog::level::err : spdlog::level::debug,
                    "{}; nothing held, rescanning in {} ms", why, retry.count());
    }
    if (why != sampling_error_) {
        sampling_error_ = why;
        status_dirty_ = true;
        notify_state();
    }
    // Nothing observed, nothing held; schedule_wake arms no IO event to hold
    // anew, and samples every idle_interval until it works again.
    apply(Holds{}, now);
    holds_dropped_ = true;
    housekeeping(now);
}

void Daemon::reopen_left_out(TimePoint now) {
    // A disk whose stat was not there yet when the map was made (one
    // appearing as it was scanned) would otherwise go unseen until the map
    // changes. A try is one failed open; it waits longer each time.
    if (!state_->sampler.leaves_out() || now < next_reopen_)
        return;
    const auto opened = state_->sampler.reopen_left_out(root_);
    for (const auto slot : opened)
        spdlog::info("the IO of {} is seen: its statistics opened",
                     state_->sampler.devices()[slot]);
    // Their counts since boot are no tick's IO: observe_sample rebases them.
    reopened_.insert(reopened_.end(), opened.begin(), opened.end());
    next_reopen_ = now + reopen_retry_.next();
}

bool Daemon::rescan_if_due(TimePoint now) {
    if (auto at = burst_rescan_at(uevent_burst_, next_rescan_); at && now >= *at) {
        // A disk's change uevents mostly change nothing latgov maps (udev's
        // after a writer closes a disk), and a rescan starts the governor
        // idle: every hold dropped mid-IO. Other uevents always rescan.
        // The discovery that compares is the one the rescan uses.
        std::optional<Topology> discovered;
        if (!uevent_burst_.must_rescan) {
            if (auto topology = discover_topology(root_); topology) {
                if (topology_fingerprint(*topology) == fingerprint_) {
                    spdlog::debug("{} uevent(s) changed nothing mapped, the last: {} {} {}",
                                  uevent_burst_.count, last_uevent_.action, last_uevent_.subsystem,
                                  last_uevent_.devpath);
                    uevent_burst_ = {};
                    return false;
                }
                discovered = std::move(*topology);
            }
        }
        spdlog::info("rescanning after {} uevent(s), the last: {} {} {}", uevent_burst_.count,
                     last_uevent_.action, last_uevent_.subsystem, last_uevent_.devpath);
        // A failure leaves the burst pending: retried.
        return rescan(now, RescanCause::uevent, std::move(discovered));
    }
    if (auto at = burst_rescan_at(hotplug_burst_, next_rescan_); at && now >= *at) {
        // The map may read the same (a CPU offline and back), while that
        // CPU's perf events are gone: always a rescan. A failure leaves the
        // burst pending.
        spdlog::info("a CPU went offline or came online (CPU hotplug steps, no uevent), "
                     "rescanning");
        return rescan(now, RescanCause::hotplug);
    }
    if (now < next_rescan_)
        return false;
    if (failed_rescan_) {
        spdlog::debug("retrying the {} rescan", to_string(*failed_rescan_));
        return rescan(now, *failed_rescan_);
    }
    // CPU hotplug moves managed IRQs: a changed online set means a new map
    // (its uevents normally come first; this holds without them). An IRQ
    // moved by irqbalance or by hand comes with no uevent at all.
    // Not while hotplug steps are pending either: their rescan comes once
    // the CPU is done.
    if (!hotplug_burst_.first && online_check_due(uevent_burst_, last_online_check_, now)) {
        last_online_check_ = now;
        if (const auto suspended = suspended_so_far()) {
            const auto before = std::exchange(boot_offset_, suspended);
            if (before && slept_between(*before, *suspended)) {
                spdlog::info("the host slept {:.1f} s (suspended, its CPUs taken offline and "
                             "back without a uevent), rescanning",
                             std::chrono::duration<double>(*suspended - *before).count());
                return rescan(now, RescanCause::resumed);
            }
        }
        // Unreadable, it tells nothing: the sampling and the periodic
        // check notice a machine that changed.
        auto online = read_online_cpus(root_);
        if (!online) {
            // Said once, not at every check of a failure that lasts.
            spdlog::log(online_unreadable_ ? spdlog::level::debug : spdlog::level::warn,
                        "{}; CPU hotplug is not checked meanwhile", online.error().message);
            online_unreadable_ = true;
        } else {
            online_unreadable_ = false;
            if (*online != state_->topology.online_cpus) {
                spdlog::info("online CPUs changed to {}, rescanning", format_cpu_list(*online));
                return rescan(now, RescanCause::hotplug);
            }
        }
        std::vector<std::string> governed;
        for (const auto& d : state_->governor.devices())
            governed.push_back(d.name);
        if (auto moved = moved_irq(root_, state_->topology, governed)) {
            spdlog::info("{}, rescanning", *moved);
            return rescan(now, RescanCause::irq_moved);
        }
    }
    // The safety net for changes no uevent reported (no socket, lost
    // messages): a discovery, and a rescan only if the map differs, since a
    // rescan starts the governor idle.
    if (now >= next_periodic_check_) {
        next_periodic_check_ = now + periodic_check_interval;
        auto topology = discover_topology(root_);
        if (!topology) {
            spdlog::warn("Failed to check the topology: {}; rescanning", topology.error().message);
            return rescan(now, RescanCause::periodic);
        }
        if (topology_fingerprint(*topology) != fingerprint_) {
            spdlog::warn("the topology changed without a uevent saying so, rescanning");
            return rescan(now, RescanCause::periodic, std::move(*topology));
        }
    }
    return false;
}

void Daemon::on_uevents(TimePoint now) {
    auto drained = uevents_->drain();
    if (drained.lost) {
        spdlog::warn("Failed to receive every kernel uevent (socket overflow), rescanning");
        last_uevent_ = Uevent{"lost", "(overflow)", "-"};
        uevent_burst_ = add_change(uevent_burst_, now);
        uevent_burst_.must_rescan = true;
    }
    for (auto& event : drained.events) {
        if (!changes_topology(event))
            continue;
        spdlog::debug("uevent: {} {} {}", event.action, event.subsystem, event.devpath);
        uevent_burst_ = add_change(uevent_burst_, now);
        uevent_burst_.must_rescan = uevent_burst_.must_rescan || !may_change_nothing(event);
        last_uevent_ = std::move(event);
    }
}

void Daemon::update_idle_watch(bool sampling, bool active) {
    auto& events = state_->events;
    const bool isolated = state_->governor.isolated_requests();
    if (isolated != isolated_) {
        isolated_ = isolated;
        status_dirty_ = true;
        if (events && isolated)
            spdlog::debug("{} requests in a row came alone: sampling while idle instead of "
                          "waking on each",
                          Governor::isolated_after);
        else if (events)
            spdlog::debug("requests come together again: waking on the first");
    }
    if ((isolated || !sampling) && events && events->any_armed())
        if (auto disarmed = events->disarm_all(); !disarmed) // sampled while idle instead
            spdlog::warn("{}", disarmed.error().message);
    // Isolated requests are timed by the recorder, which wakes nobody:
    // the periodic ones get windows held ahead of them.
    if (auto& recorder = state_->recorder) {
        if (isolated && sampling && !recorder->armed()) {
            if (auto armed = recorder->arm(); !armed) {
                spdlog::warn("{}; nothing is held ahead of periodic requests",
                             armed.error().message);
                recorder.reset();
            }
        } else if ((!isolated || !sampling) && recorder->any_armed()) {
            if (auto disarmed = recorder->disarm_all(); !disarmed)
                spdlog::warn("{}", disarmed.error().message);
        }
    }
    if (!active && events && !events->armed() && !isolated && sampling) {
        // Journal now what the first request will hold, so that the onset
        // itself only writes the CPU files.
        percpu_.prepare(likely_holds());
        if (auto armed = events->arm(); !armed) {
            spdlog::warn("{}; sampling while idle instead", armed.error().message);
            state_->events_kind = IoEventsState::unavailable;
            state_->events_state = "unavailable: " + armed.error().message;
            unwatch_events();
            events.reset();
        }
    }
}

void Daemon::schedule_wake(TimePoint now) {
    // While nothing can be sampled nothing is held: the idle schedule
    // retries, and no IO event or window holds anew.
    const bool sampling = sampling_error_.empty();
    const bool active = sampling && state_->governor.any_active();
    update_idle_watch(sampling, active);
    const auto& events = state_->events;
    const bool events_armed = !active && events && events->armed();
    // A status that still lists a queue active is due when the queue went
    // idle with IO events armed: the idle wake is the housekeeping's, far
    // later. Not where counters wake the daemon: its ticks come often
    // enough, and a wake at the very end of status_interval would make
    // every status write's own IO on a governed disk (seen by the counters
    // at the next tick) a reason for the next write.
    const bool status_pending = status_dirty_ || (status_shows_activity_ && events_armed);
    const ScheduleState schedule{.active = active,
                                 .sparse = state_->governor.sparse_requests(),
                                 .events_armed = events_armed,
                                 .watch_only = !state_->governor.can_hold(),
                                 .last_change = last_change_,
                                 .next_tick = cadence_.base(),
                                 .status_dirty = status_pending,
                                 .last_status = last_status_,
                                 .watchdog = watchdog_interval_,
                                 .rescan_at = rescan_at()};
    const auto deadline = next_deadline(schedule, config_.daemon, now);
    cadence_.armed(deadline.next_tick);
    wake_at_ = deadline.wake;
    // Without a recorder a window would not see its request. epoll_wait
    // rounds its timeout up to whole milliseconds: a millisecond earlier
    // (open_window takes it as due).
    window_at_ = state_->recorder && sampling ? state_->governor.window_opens(now) : std::nullopt;
    if (window_at_) {
        *window_at_ -= window_slack();
        wake_at_ = std::min(wake_at_, *window_at_);
    }
    // A close already past waits for a tick that samples (one that could
    // not keeps the window open: the sampling period retries, no spin).
    if (auto closes = state_->governor.window_closes(); closes && *closes > now)
        wake_at_ = std::min(wake_at_, *closes);
}

void Daemon::reload(TimePoint now) {
    sd_notifyf(
        0, "RELOADING=1\nSTATUS=Reloading configuration\nMONOTONIC_USEC=%llu",
        static_cast<unsigned long long>(
            std::chrono::duration_cast<std::chrono::microseconds>(now.time_since_epoch()).count()));
    auto config = load_daemon_config(options_);
    if (!config) {
        // Nothing changes, the map included: a rescan would start the
        // governor idle and drop every hold mid-IO for nothing.
        spdlog::error("Failed to reload the configuration: {}; keeping the running one",
                      config.error().message);
        notify_state("READY=1\n");
        return;
    }
    if (config->daemon.runtime_dir != config_.daemon.runtime_dir)
        spdlog::warn("runtime_dir cannot change on reload, keeping {}",
                     config_.daemon.runtime_dir.string());
    config->daemon.runtime_dir = config_.daemon.runtime_dir;
    // node_exporter would go on serving the file the old configuration
    // named; the next status write makes the new one.
    if (config->daemon.metrics_file != config_.daemon.metrics_file)
        remove_metrics_file();
    config_ = std::move(*config);
    spdlog::set_level(spdlog::level::from_str(config_.daemon.log_level));
    spdlog::info("configuration reloaded");
    // Failing, it is tried again (rescan_if_due) until the new
    // configuration governs.
    rescan(now, RescanCause::reload);
    status_dirty_ = true;
    notify_state("READY=1\n");
}

bool Daemon::shutdown() {
    gate_->open = false; // no kick thread holds anything again
    sd_notify(0, "STOPPING=1\nSTATUS=Releasing constraints");
    const bool released = percpu_.release_all();
    global_.apply(std::nullopt, std::chrono::steady_clock::now());
    // A status left behind tells `latgov status` and `latgov doctor` that
    // this latgovd is gone with limits it may still hold; the restore that
    // puts them back removes it.
    if (runtime_ && released)
        if (auto removed = runtime_->remove(status_file_name); !removed)
            spdlog::warn("{}", removed.error().message);
    // node_exporter would go on serving a stopped daemon's last values.
    remove_metrics_file();
    if (released)
        spdlog::info("stopped; every constraint released");
    else
        spdlog::error("stopped, but not every constraint could be released (above); the "
                      "status stays for `latgov status` and `latgov doctor`, and `latgovd "
                      "--restore` tries again");
    if (state_ && (evidence_unsaved_ || evidence_to_save_))
        save_learnt_evidence(state_->governor.evidence(), config_.daemon.evidence_file);
    else if (state_ && !options_.dry_run) // --dry-run writes no file
        save_unfinished_evidence(state_->governor, config_.daemon);
    return released;
}

// What the first requests after idle would hold: every queue activated on a
// copy of the governor.
std::map<int, LatencyLimit> Daemon::likely_holds() const {
    std::map<int, LatencyLimit> likely;
    if (!state_)
        return likely;
    Governor what_if = state_->governor;
    const auto now = std::chrono::steady_clock::now();
    for (const auto& d : state_->governor.devices())
        for (const auto& q : d.queues)
            if (!q.submit_cpus.empty())
                what_if.on_request_issued(d.kernel_dev, q.submit_cpus.front(), now);
    for (const auto& [cpu, hold] : what_if.holds().percpu)
        likely[cpu] = hold.limit;
    return likely;
}

int Daemon::run() {
    // The signals the loop reads are blocked since main(). The lock is
    // released only while the loop waits.
    std::unique_lock lock(gate_->mutex);
    // No exception may leave with limits held.
    try {
        return run_loop(lock);
    } catch (...) {
        spdlog::critical("Unexpected error, releasing every constraint: {}",
                         current_exception_text());
    }
    try {
        if (!lock.owns_lock())
            lock.lock();
        shutdown();
    } catch (...) {
        spdlog::critical("Failed to release every constraint ({}): the journal in {} keeps "
                         "them for `latgovd --restore`",
                         current_exception_text(), config_.daemon.runtime_dir.string());
    }
    return 1;
}

bool Daemon::open_runtime_dir() {
    if (options_.dry_run) {
        spdlog::info("dry run: no restore, no calibration, nothing written to {}",
                     config_.daemon.runtime_dir.string());
        return true;
    }
    auto dir = RuntimeDir::open(config_.daemon.runtime_dir, true);
    if (!dir) {
        spdlog::error("{}", dir.error().message);
        return false;
    }
    if (const auto narrowed = dir->narrowed_message(); !narrowed.empty())
        spdlog::info("{}", narrowed);
    // The lock also covers /dev/cpu_dma_latency: another runtime directory
    // must not write the same per-CPU files.
    if (auto guarded = dir->guard_cpus(root_); !guarded) {
        spdlog::error("{}", guarded.error().message);
        return false;
    }
    switch (lock_runtime_dir(*dir, options_.wait_for_lock)) {
    case LockWait::locked:
        break;
    case LockWait::stopped:
        stopped_before_start_ = true; // nothing written yet
        return false;
    case LockWait::failed:
        return false;
    }
    runtime_ = std::move(*dir);
    // The journal is reached through the directory checked above, not by
    // its path again.
    auto journal = journal_in(*runtime_);
    if (!journal) {
        spdlog::error("{}", journal.error().message);
        return false;
    }
    percpu_.use_journal_place(std::move(*journal));
    struct statfs fs {};
    if (::fstatfs(runtime_->fd(), &fs) == 0 && fs.f_type != TMPFS_MAGIC && fs.f_type != RAMFS_MAGIC)
        spdlog::warn("{} is not on tmpfs: latgovd's own journal and status writes there are "
                     "IO that a governed disk may see; use a tmpfs (systemd's /run is one)",
                     config_.daemon.runtime_dir.string());
    if (auto ours = check_journal_is_ours(*runtime_, root_); !ours) {
        spdlog::error("{}", ours.error().message);
        start_failure_status_ = exit_config; // a restart would find the same journal
        return false;
    }
    // A run that was killed may have left values behind: put them back first.
    if (auto prepared = prepare_runtime_dir(*runtime_, root_, config_.daemon); !prepared)
        spdlog::error("{}", prepared.error().message);
    return true;
}

bool Daemon::open_event_loop() {
    // Subscribed before the first discovery, so that nothing changes unseen
    // between the two; what came before the discovery is in it.
    if (!root_.is_live()) {
        spdlog::info("kernel uevents not watched under --sysroot: the tree is rescanned every {} s "
                     "if it changed",
                     periodic_check_interval.count());
    } else if (auto monitor = UeventMonitor::open(); !monitor) {
        spdlog::warn("{}; new or changed devices are found by the check every {} s instead",
                     monitor.error().message, periodic_check_interval.count());
    } else {
        uevents_ = std::move(*monitor);
        uevents_->drain();
    }
    const sigset_t mask = daemon_signals(); // blocked by block_daemon_signals()
    signals_ = Fd(::signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK));
    epoll_ = Fd(::epoll_create1(EPOLL_CLOEXEC));
    gate_->wake = Fd(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
    if (!signals_ || !epoll_ || !gate_->wake) {
        spdlog::error("Failed to set up the event loop: {}", errno_message(errno));
        return false;
    }
    // Without these the loop could not stop, or would miss the onsets the
    // kick threads see.
    if (!watch(signals_.get(), "the signals") ||
        !watch(gate_->wake.get(), "the kick threads' wake-up")) {
        spdlog::error("Failed to set up the event loop");
        return false;
    }
    if (uevents_ && !watch(uevents_->fd(), "the kernel's uevents (the periodic check alone "
                                           "finds devices added or removed)"))
        uevents_.reset();
    // Without uevents, CPU hotplug is watched from before the first
    // discovery too; each map opens it anew on its own CPUs.
    if (!uevents_)
        if (auto online = read_online_cpus(root_))
            watch_hotplug(*online, std::chrono::steady_clock::now());
    return true;
}

bool Daemon::start() {
    if (!open_runtime_dir())
        return false;
    if (runtime_) // not in a dry run
        calibrate_if_unusable(root_, config_, *runtime_);
    if (!open_event_loop())
        return false;
    auto state = build_governed_state(root_, config_);
    if (!state) {
        spdlog::error("{}", state.error().message);
        return false;
    }
    auto now = std::chrono::steady_clock::now();
    install(std::move(*state), now, RescanCause::start); // watches the IO events
    spdlog::info("idle-state costs: {}", state_->cost_source);
    // Logged, not printed: under systemd a print to stderr blocks while
    // journald does not read, and the log's stream never does.
    auto table = format_topology_table(state_->topology);
    if (table.ends_with('\n'))
        table.pop_back();
    spdlog::info("topology:\n{}", table);

    std::uint64_t watchdog_usec = 0;
    if (sd_watchdog_enabled(0, &watchdog_usec) > 0)
        watchdog_interval_ = std::chrono::microseconds(watchdog_usec);

    now = std::chrono::steady_clock::now();
    cadence_.restart(now);
    tick(now);
    write_status(now);
    schedule_wake(now);
    // Ready even when the first tick could not sample: latgovd is up, says
    // why in its status, and samples again on its own. Failing the start
    // would make the service manager restart it against the same files.
    notify_state("READY=1\n");
    spdlog::info("latgovd ready");
    return true;
}

int Daemon::wait_for_events(std::span<epoll_event> events, std::unique_lock<std::mutex>& lock) {
    // The tick's deadline is epoll's timeout: a tick costs no timer
    // syscalls (steady_clock is CLOCK_MONOTONIC, read in the vDSO).
    timespec timeout = wait_timeout(wake_at_, std::chrono::steady_clock::now());
    const int max = static_cast<int>(events.size());
    int n = -1;
    bool pwait2 = have_epoll_pwait2_; // the member is the lock's
    const TimePoint waits_until = loop_waits_until_ = wake_at_;
    lock.unlock(); // the kick threads take IO events meanwhile
    if (evidence_to_save_ || metrics_to_write_) {
        write_pending();
        // The deadline as it was: a kick thread that moved it woke the loop.
        timeout = wait_timeout(waits_until, std::chrono::steady_clock::now());
    }
    if (pwait2) {
        n = ::epoll_pwait2(epoll_.get(), events.data(), max, &timeout, nullptr);
        // Before Linux 5.11, or refused by a seccomp filter that does not
        // know it: whole milliseconds, rounded up, from here on.
        const int pwait2_errno = n < 0 ? errno : 0;
        pwait2 = pwait2_errno != ENOSYS && pwait2_errno != EPERM;
        if (!pwait2) // logged now: the wait below may be long
            spdlog::debug("epoll_pwait2: {}; ticks in whole milliseconds",
                          errno_message(pwait2_errno));
    }
    if (!pwait2)
        n = ::epoll_wait(epoll_.get(), events.data(), max, wait_timeout_ms(timeout));
    const int wait_errno = errno;
    lock.lock();
    have_epoll_pwait2_ = pwait2;
    errno = wait_errno;
    return n;
}

std::optional<int> Daemon::on_signals() {
    signalfd_siginfo info{};
    while (::read(signals_.get(), &info, sizeof info) == sizeof info) {
        if (info.ssi_signo == SIGHUP) {
            const auto now = std::chrono::steady_clock::now();
            reload(now);
            cadence_.restart(now);
            schedule_wake(now); // the rescan made new, unarmed IO events
        } else {
            spdlog::info("received {}, stopping", strsignal(static_cast<int>(info.ssi_signo)));
            return shutdown() ? 0 : 1;
        }
    }
    return std::nullopt;
}

int Daemon::run_loop(std::unique_lock<std::mutex>& lock) {
    if (!start())
        return stopped_before_start_ ? 0 : start_failure_status_;
    for (;;) {
        std::array<epoll_event, max_events_per_wait> events;
        const int n = wait_for_events(events, lock);
        if (cpu_thread_failed_)
            std::rethrow_exception(cpu_thread_failed_);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            spdlog::error("Failed to wait for events: {}", errno_message(errno));
            shutdown();
            return 1;
        }
        for (const auto& event : std::span(events).first(static_cast<std::size_t>(n))) {
            const int fd = event.data.fd;
            if (fd == signals_.get()) {
                if (auto stopped = on_signals())
                    return *stopped;
            } else if (uevents_ && fd == uevents_->fd()) {
                on_uevents(std::chrono::steady_clock::now());
                schedule_wake(std::chrono::steady_clock::now()); // wake when the burst is due
            } else if (hotplug_ && hotplug_->owns(fd)) {
                on_hotplug(std::chrono::steady_clock::now());
                schedule_wake(std::chrono::steady_clock::now()); // wake when the burst is due
            } else if (fd == gate_->wake.get()) {
                std::uint64_t value = 0;
                (void)!::read(gate_->wake.get(), &value, sizeof value);
            } else if (state_->events) {
                on_io_ready(std::chrono::steady_clock::now());
            }
        }
        const auto now = std::chrono::steady_clock::now();
        if (window_at_ && now >= *window_at_) {
            open_window(now);
            schedule_wake(now);
        }
        if (now >= wake_at_) {
            tick(now);
            schedule_wake(now);
        }
    }
}

// Only the loop thread touches what is pending, the lock down or not.
void Daemon::write_pending() {
    if (evidence_to_save_) {
        const PendingEvidence pending = std::move(*evidence_to_save_);
        evidence_to_save_.reset();
        save_learnt_evidence(pending.book, pending.file);
    }
    if (metrics_to_write_) {
        const PendingMetrics pending = std::move(*metrics_to_write_);
        metrics_to_write_.reset();
        if (auto written = replace_file(pending.file, pending.text); !written) {
            if (!metrics_failed_)
                spdlog::warn("{}", written.error().message);
            metrics_failed_ = true;
        } else {
            metrics_failed_ = false;
        }
    }
}

} // namespace latgov
