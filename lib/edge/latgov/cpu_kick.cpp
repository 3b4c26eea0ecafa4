#include "latgov/cpu_kick.hpp"

#include "latgov/sysroot.hpp"

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <sched.h>
#include <string>
#include <sys/eventfd.h>
#include <unistd.h>

namespace latgov {

namespace {

// The thread only reads an eventfd: a small stack is plenty.
constexpr std::size_t stack_size = 64 * 1024;

} // namespace

Result<std::unique_ptr<CpuKicker>> CpuKicker::start(const std::vector<int>& cpus) {
    std::unique_ptr<CpuKicker> kicker(new CpuKicker());
    kicker->asked_ = cpus;
    std::string& refused = kicker->refused_;
    for (int cpu : cpus) {
        if (cpu < 0 || cpu >= CPU_SETSIZE)
            continue;
        auto worker = std::make_unique<Worker>();
        worker->cpu = cpu;
        worker->wake = Fd(::eventfd(0, EFD_CLOEXEC));
        if (!worker->wake)
            return make_error("Failed to create an eventfd to wake cpu " + std::to_string(cpu) +
                              ": " + errno_message(errno));
        pthread_attr_t attr;
        ::pthread_attr_init(&attr);
        ::pthread_attr_setstacksize(&attr, stack_size);
        cpu_set_t set;
        CPU_ZERO(&set);
        CPU_SET(static_cast<unsigned>(cpu), &set);
        ::pthread_attr_setaffinity_np(&attr, sizeof set, &set);
        const int err = ::pthread_create(&worker->thread, &attr, &CpuKicker::run, worker.get());
        ::pthread_attr_destroy(&attr);
        if (err != 0) {
            refused += (refused.empty() ? "" : ", ") + std::to_string(cpu) + " (" +
                       errno_message(err) + ")";
            continue;
        }
        kicker->workers_.push_back(std::move(worker));
    }
    if (kicker->workers_.empty())
        return make_error("Failed to start a thread on any CPU to wake it: " +
                          (refused.empty() ? std::string("no CPU given") : refused));
    return kicker;
}

void* CpuKicker::run(void* arg) {
    auto* worker = static_cast<Worker*>(arg);
    // Signals are the main thread's (signalfd).
    sigset_t all;
    ::sigfillset(&all);
    ::pthread_sigmask(SIG_BLOCK, &all, nullptr);
    const std::string name = "latgov-kick/" + std::to_string(worker->cpu);
    ::pthread_setname_np(::pthread_self(), name.substr(0, 15).c_str());
    for (;;) {
        std::uint64_t value = 0;
        const ssize_t n = ::read(worker->wake.get(), &value, sizeof value);
        if (worker->stop.load(std::memory_order_acquire))
            break;
        if (n == sizeof value) {
            worker->last_cpu.store(::sched_getcpu(), std::memory_order_relaxed);
            worker->count.fetch_add(1, std::memory_order_release);
        } else if (n < 0 && errno != EINTR) {
            break;
        }
    }
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
    for (auto& w : workers_) {
        w->stop.store(true, std::memory_order_release);
        const std::uint64_t one = 1;
        // An eventfd write only fails when the counter would overflow,
        // which cannot happen to a thread that reads it.
        (void)!::write(w->wake.get(), &one, sizeof one);
    }
    for (auto& w : workers_)
        ::pthread_join(w->thread, nullptr);
}

} // namespace latgov
