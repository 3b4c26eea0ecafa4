// Wakes idle CPUs so that they choose their idle state again.
//
// A CPU reads its PM QoS resume latency when it enters idle. A limit
// written while it sleeps applies from its next wake-up, and for a CPU
// that completes IO that wake-up is the completion interrupt itself: the
// first request after idle pays the exit the limit is there to avoid. The
// kernel's global request (/dev/cpu_dma_latency) wakes every idle CPU when
// it changes for this reason; the per-CPU files wake none. So latgovd wakes
// the CPUs it has just constrained, and only those: a thread per CPU,
// pinned there and asleep on an eventfd, is woken by a write, runs for a
// moment and sleeps again, and the CPU idles under its new limit. The
// write does not wait for the CPU to wake.
//
// A thread also waits for the fds watched for its CPU (latgovd's IO issue
// events of that CPU) and runs a handler when one is ready, on that CPU. The
// kernel signals such an event on the CPU that issued the request, and the
// reader pinned there wakes without an interrupt to another CPU: that
// interrupt is an idle exit when the other CPU sleeps (an exit to the host in
// a guest), and it came before the first request after idle could be held.
#pragma once

#include "latgov/fd.hpp"
#include "latgov/result.hpp"

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <pthread.h>
#include <string>
#include <string_view>
#include <vector>

namespace latgov {

// The threads are named this and their CPU ("latgovd/3"): latgovd's
// IO filters leave out the requests they issue (journal writes on a
// governed disk) as they leave out the main thread's.
inline constexpr std::string_view kick_thread_prefix = "latgovd/";

class CpuKicker {
  public:
    // Runs on the thread of a CPU when a watched fd of that CPU is ready;
    // given the CPU. It is the caller's to consume what made the fd ready:
    // epoll is level-triggered, and an fd that polls readable again calls
    // it again (a perf event polls readable once per wake-up). It must not
    // throw: the thread would end the process (std::terminate).
    using ReadyHandler = std::function<void(int cpu)>;

    // One thread per CPU of `cpus`. A CPU that refuses a pinned thread (it
    // went offline) is left out; none at all is an error.
    static Result<std::unique_ptr<CpuKicker>> start(const std::vector<int>& cpus,
                                                    ReadyHandler on_ready = {});
    // The online CPUs (may have) changed: the threads of CPUs no longer in
    // `cpus` stop, new CPUs get one, and the threads of CPUs in both keep
    // running, pinned again (a CPU that went offline and came back had its
    // thread moved off it). The threads that stop are not waited for: one
    // may be in the handler, waiting for a lock the caller holds. Each ends
    // when it next runs (a handler it is in finishes first).
    void update(const std::vector<int>& cpus);

    // Wakes the thread of `cpu`; false when the CPU has none.
    bool kick(int cpu);
    // Has the thread of `cpu` wait for `fd` to be readable too, and run the
    // handler then; false (nothing watched) when the CPU has no thread, the
    // kicker no handler, or epoll refuses the fd. A thread stopped by
    // update() forgets its fds.
    bool watch(int cpu, int fd);
    // Stops watching `fd`, before it is closed: closing it alone would not
    // if the file outlived it (a copy of the fd elsewhere), and a readable
    // file nobody drains would wake the thread for ever.
    void unwatch(int cpu, int fd);
    // The CPUs that have a thread, sorted.
    std::vector<int> cpus() const;
    // The CPUs start() was given, and those that refused a thread with why
    // ("" when none did).
    const std::vector<int>& asked() const { return asked_; }
    const std::string& refused() const { return refused_; }

    // How often the thread of `cpu` woke, and where it last ran.
    struct Wakes {
        std::uint64_t count = 0;
        int last_cpu = -1;
    };
    Wakes wakes(int cpu) const;

    CpuKicker(const CpuKicker&) = delete;
    CpuKicker& operator=(const CpuKicker&) = delete;
    // Stops the threads: each is joined within stop_wait, and one that has
    // not run by then (its CPU kept busy) is detached; it ends when it runs.
    ~CpuKicker();
    static constexpr std::chrono::milliseconds stop_wait{200};

  private:
    // Shared by the kicker and the thread, so that a detached thread's
    // eventfd and counters outlive the kicker.
    struct Worker {
        int cpu = 0;
        Fd wake;  // eventfd
        Fd epoll; // the eventfd and the fds watched
        std::shared_ptr<const ReadyHandler> on_ready;
        pthread_t thread{};
        std::atomic<std::uint64_t> count{0};
        std::atomic<int> last_cpu{-1};
        std::atomic<bool> stop{false};
        // Its loop returned. Set under `alive`, which update() holds while
        // it pins the thread: unset there, the thread has not exited, and
        // its id still names it.
        std::mutex alive;
        bool ended = false;
    };
    CpuKicker() = default;
    // Starts the thread of `cpu` into workers_; why not, on failure.
    Result<void> start_worker(int cpu);
    // Tells the threads to stop; joins each within stop_wait if `join`,
    // else (and past that) leaves it to end when it runs.
    static void stop_workers(const std::vector<std::shared_ptr<Worker>>& workers, bool join);
    static void* run(void* worker) noexcept;
    std::vector<std::shared_ptr<Worker>> workers_;
    std::shared_ptr<const ReadyHandler> on_ready_;
    std::vector<int> asked_;
    std::string refused_;
};

} // namespace latgov
