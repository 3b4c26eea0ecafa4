#include "latgov/cpu_kick.hpp"

#include "latgov/sysroot.hpp"

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <sched.h>
#include <string>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

namespace latgov {

namespace {

// Waking the CPU needs next to no stack; the ready handler runs latgovd's
// onset (its governor, the writes, a log line), far less than this, which is
// only touched as used.
constexpr std::size_t stack_size = 1024 * 1024;

cpu_set_t only(int cpu) {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(static_cast<unsigned>(cpu), &set);
    return set;
}

// Does not wait for a thread that cannot run: its CPU stays in the mask.
bool pin(pthread_t thread, int cpu) {
    const cpu_set_t set = only(cpu);
    return ::pthread_setaffinity_np(thread, sizeof set, &set) == 0;
}

} // namespace

Result<void> CpuKicker::start_worker(int cpu) {
    if (cpu < 0 || cpu >= CPU_SETSIZE)
        return make_error("no such CPU");
    auto worker = std::make_shared<Worker>();
    worker->cpu = cpu;
    worker->wake = Fd(::eventfd(0, EFD_CLOEXEC));
    if (!worker->wake)
        return make_error("eventfd: " + errno_message(errno));
    worker->epoll = Fd(::epoll_create1(EPOLL_CLOEXEC));
    if (!worker->epoll)
        return make_error("epoll_create1: " + errno_message(errno));
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.fd = worker->wake.get();
    if (::epoll_ctl(worker->epoll.get(), EPOLL_CTL_ADD, worker->wake.get(), &ev) != 0)
        return make_error("epoll_ctl: " + errno_message(errno));
    worker->on_ready = on_ready_;
    pthread_attr_t attr;
    ::pthread_attr_init(&attr);
    ::pthread_attr_setstacksize(&attr, stack_size);
    const cpu_set_t set = only(cpu);
    ::pthread_attr_setaffinity_np(&attr, sizeof set, &set);
    // The thread owns a reference: it may outlive the kicker (detached).
    auto* own = new std::shared_ptr<Worker>(worker);
    const int err = ::pthread_create(&worker->thread, &attr, &CpuKicker::run, own);
    ::pthread_attr_destroy(&attr);
    if (err != 0) {
        delete own;
        return make_error(errno_message(err));
    }
    workers_.push_back(std::move(worker));
    return {};
}

Result<std::unique_ptr<CpuKicker>> CpuKicker::start(const std::vector<int>& cpus,
                                                    ReadyHandler on_ready) {
    std::unique_ptr<CpuKicker> kicker(new CpuKicker());
    if (on_ready)
        kicker->on_ready_ = std::make_shared<const ReadyHandler>(std::move(on_ready));
    kicker->update(cpus);
    if (kicker->workers_.empty())
        return make_error(
            "Failed to start a thread on any CPU to wake it: " +
            (kicker->refused_.empty() ? std::string("no CPU given") : kicker->refused_));
    return kicker;
}

void CpuKicker::update(const std::vector<int>& cpus) {
    asked_ = cpus;
    refused_.clear();
    std::vector<std::shared_ptr<Worker>> leaving;
    std::erase_if(workers_, [&](const auto& w) {
        // A CPU that went offline (and maybe came back) had its thread moved
        // off it with a wider affinity: pinned again. A thread that ended is
        // started anew, never pinned: glibc would pass the thread id the
        // kernel cleared at its end, 0, which pins the caller. It cannot end
        // while `alive` is held here.
        if (std::find(cpus.begin(), cpus.end(), w->cpu) == cpus.end()) {
            leaving.push_back(w);
            return true;
        }
        const std::lock_guard alive(w->alive);
        const bool gone = w->ended || !pin(w->thread, w->cpu);
        if (gone)
            leaving.push_back(w);
        return gone;
    });
    stop_workers(leaving, false);
    for (int cpu : cpus) {
        if (std::any_of(workers_.begin(), workers_.end(),
                        [cpu](const auto& w) { return w->cpu == cpu; }))
            continue;
        if (auto started = start_worker(cpu); !started)
            refused_ += (refused_.empty() ? "" : ", ") + std::to_string(cpu) + " (" +
                        started.error().message + ")";
    }
}

void CpuKicker::stop_workers(const std::vector<std::shared_ptr<Worker>>& workers, bool join) {
    for (const auto& w : workers) {
        w->stop.store(true, std::memory_order_release);
        const std::uint64_t one = 1;
        // An eventfd write only fails when the counter would overflow,
        // which cannot happen to a thread that reads it.
        (void)!::write(w->wake.get(), &one, sizeof one);
    }
    if (!join) {
        for (const auto& w : workers)
            ::pthread_detach(w->thread);
        return;
    }
    // Monotonic: a clock step does not stretch or cut the wait.
    timespec deadline{};
    ::clock_gettime(CLOCK_MONOTONIC, &deadline);
    const auto wait_ns = std::chrono::nanoseconds(stop_wait).count();
    deadline.tv_sec += static_cast<time_t>((deadline.tv_nsec + wait_ns) / 1'000'000'000);
    deadline.tv_nsec = static_cast<long>((deadline.tv_nsec + wait_ns) % 1'000'000'000);
    for (const auto& w : workers)
        if (::pthread_clockjoin_np(w->thread, nullptr, CLOCK_MONOTONIC, &deadline) != 0)
            ::pthread_detach(w->thread); // its CPU is kept busy: it ends when it runs
}

void* CpuKicker::run(void* arg) noexcept {
    const std::unique_ptr<std::shared_ptr<Worker>> own(static_cast<std::shared_ptr<Worker>*>(arg));
    Worker* worker = own->get();
    // Signals are the main thread's (signalfd).
    sigset_t all;
    ::sigfillset(&all);
    ::pthread_sigmask(SIG_BLOCK, &all, nullptr);
    // No allocation, so nothing here throws. 15 bytes: CPUs up to 9999999.
    char name[16];
    std::snprintf(name, sizeof name, "%.*s%d", static_cast<int>(kick_thread_prefix.size()),
                  kick_thread_prefix.data(), worker->cpu);
    ::pthread_setname_np(::pthread_self(), name);
    for (;;) {
        epoll_event ready[8];
        const int n = ::epoll_wait(worker->epoll.get(), ready, 8, -1);
        if (worker->stop.load(std::memory_order_acquire))
            break;
        if (n < 0 && errno != EINTR)
            break;
        bool watched = false;
        for (int i = 0; i < n; ++i) {
            if (ready[i].data.fd != worker->wake.get()) {
                watched = true;
                continue;
            }
            std::uint64_t value = 0;
            if (::read(worker->wake.get(), &value, sizeof value) == sizeof value) {
                worker->last_cpu.store(::sched_getcpu(), std::memory_order_relaxed);
                worker->count.fetch_add(1, std::memory_order_release);
            }
        }
        if (watched && worker->on_ready)
            (*worker->on_ready)(worker->cpu);
        // A CPU that went offline had this thread moved off it, with a
        // wider affinity that stays once it is back, and nothing may tell
        // latgovd it was gone (its online list reads the same again). Found
        // elsewhere, the thread pins itself again: a syscall only then, and
        // refused while the CPU is still offline.
        if (::sched_getcpu() != worker->cpu)
            pin(::pthread_self(), worker->cpu);
    }
    const std::lock_guard alive(worker->alive);
    worker->ended = true;
    return nullptr;
}

bool CpuKicker::kick(int cpu) {
    auto it = std::find_if(workers_.begin(), workers_.end(),
                           [cpu](const auto& w) { return w->cpu == cpu; });
    if (it == workers_.end())
        return false;
    const std::uint64_t one = 1;
    return ::write((*it)->wake.get(), &one, sizeof one) == sizeof one;
}

bool CpuKicker::watch(int cpu, int fd) {
    auto it = std::find_if(workers_.begin(), workers_.end(),
                           [cpu](const auto& w) { return w->cpu == cpu; });
    if (it == workers_.end() || !(*it)->on_ready)
        return false;
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.fd = fd;
    return ::epoll_ctl((*it)->epoll.get(), EPOLL_CTL_ADD, fd, &ev) == 0;
}

void CpuKicker::unwatch(int cpu, int fd) {
    auto it = std::find_if(workers_.begin(), workers_.end(),
                           [cpu](const auto& w) { return w->cpu == cpu; });
    if (it != workers_.end())
        (void)::epoll_ctl((*it)->epoll.get(), EPOLL_CTL_DEL, fd, nullptr); // ENOENT: not watched
}

std::vector<int> CpuKicker::cpus() const {
    std::vector<int> cpus;
    for (const auto& w : workers_)
        cpus.push_back(w->cpu);
    std::sort(cpus.begin(), cpus.end());
    return cpus;
}

CpuKicker::Wakes CpuKicker::wakes(int cpu) const {
    for (const auto& w : workers_)
        if (w->cpu == cpu)
            return {w->count.load(std::memory_order_acquire),
                    w->last_cpu.load(std::memory_order_relaxed)};
    return {};
}

CpuKicker::~CpuKicker() {
    stop_workers(workers_, true);
}

} // namespace latgov
