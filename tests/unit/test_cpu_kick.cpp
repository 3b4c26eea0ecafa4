// The threads that wake a CPU after latgovd constrains it: a kick wakes
// the thread pinned to that CPU, it runs there, and the threads stop when
// the kicker goes. A thread also runs the handler, on its CPU, for the fds
// watched for that CPU.
#include "allowed_cpus.hpp"
#include "latgov/cpu_kick.hpp"

#include <atomic>
#include <chrono>
#include <doctest/doctest.h>
#include <fcntl.h>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <sched.h>
#include <string>
#include <sys/eventfd.h>
#include <thread>
#include <unistd.h>
#include <vector>

using namespace latgov;

namespace {

// Waits up to 5 s for the thread of `cpu` to have woken `count` times.
CpuKicker::Wakes wait_for(const CpuKicker& kicker, int cpu, std::uint64_t count) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    auto wakes = kicker.wakes(cpu);
    while (wakes.count < count && std::chrono::steady_clock::now() < deadline) {
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
        wakes = kicker.wakes(cpu);
    }
    return wakes;
}

// The thread id of latgovd/<cpu> in this process, 0 if none.
int kicker_thread_id(int cpu) {
    const std::string name = "latgovd/" + std::to_string(cpu);
    for (const auto& task : std::filesystem::directory_iterator("/proc/self/task")) {
        std::ifstream comm(task.path() / "comm");
        std::string line;
        if (std::getline(comm, line) && line == name)
            return std::stoi(task.path().filename().string());
    }
    return 0;
}

// The same, once the thread has named itself (it does so as it starts):
// waits up to 5 s.
int started_kicker_thread_id(int cpu) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    int tid = kicker_thread_id(cpu);
    while (tid == 0 && std::chrono::steady_clock::now() < deadline) {
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
        tid = kicker_thread_id(cpu);
    }
    return tid;
}

// A kicker with a thread for the first CPU this process may use, moved by
// hand to the second: what a CPU going offline does to the thread pinned
// there (it is moved to another CPU, with a wider affinity that stays once
// the CPU is back).
struct MovedOff {
    std::unique_ptr<CpuKicker> kicker;
    int cpu = -1;
    int elsewhere = -1;
    int tid = 0;
};

MovedOff thread_moved_off_its_cpu() {
    const auto cpus = allowed_cpus();
    REQUIRE(cpus.size() >= 2); // the test beds have 2 CPUs or more
    MovedOff moved;
    moved.cpu = cpus[0];
    moved.elsewhere = cpus[1];
    auto started = CpuKicker::start({moved.cpu});
    REQUIRE(started);
    moved.kicker = std::move(*started);
    moved.tid = started_kicker_thread_id(moved.cpu);
    REQUIRE(moved.tid > 0);
    cpu_set_t away;
    CPU_ZERO(&away);
    CPU_SET(static_cast<unsigned>(moved.elsewhere), &away);
    REQUIRE(::sched_setaffinity(moved.tid, sizeof away, &away) == 0);
    return moved;
}

bool pinned_to(int tid, int cpu) {
    cpu_set_t set;
    CPU_ZERO(&set);
    return ::sched_getaffinity(tid, sizeof set, &set) == 0 && CPU_COUNT(&set) == 1 &&
           CPU_ISSET(static_cast<unsigned>(cpu), &set);
}

// This process's epoll descriptors.
std::vector<int> epoll_fds() {
    std::vector<int> fds;
    for (const auto& fd : std::filesystem::directory_iterator("/proc/self/fd")) {
        std::error_code ec;
        if (std::filesystem::read_symlink(fd.path(), ec).string() == "anon_inode:[eventpoll]")
            fds.push_back(std::stoi(fd.path().filename().string()));
    }
    return fds;
}

} // namespace

TEST_CASE("a kick wakes the thread of that CPU, and it runs there (two CPUs)") {
    const auto cpus = allowed_cpus();
    REQUIRE(cpus.size() >= 2); // "only the CPU kicked woke" needs another
    auto kicker = CpuKicker::start(cpus);
    REQUIRE(kicker);
    CHECK((*kicker)->cpus() == cpus);
    for (int cpu : cpus) {
        CHECK((*kicker)->wakes(cpu).count == 0);
        REQUIRE((*kicker)->kick(cpu));
        const auto wakes = wait_for(**kicker, cpu, 1);
        CHECK(wakes.count == 1);
        CHECK(wakes.last_cpu == cpu);
    }
    // Only the CPU kicked woke.
    const int first = cpus.front();
    REQUIRE((*kicker)->kick(first));
    CHECK(wait_for(**kicker, first, 2).count == 2);
    for (int cpu : cpus)
        if (cpu != first)
            CHECK((*kicker)->wakes(cpu).count == 1);
}

TEST_CASE("a CPU without a thread is not kicked, and CPUs that refuse a thread are left out") {
    const auto cpus = allowed_cpus();
    // CPU_SETSIZE - 1 is no CPU of a machine this runs on: its thread
    // cannot be pinned, and it is left out rather than failing the rest.
    std::vector<int> asked = {cpus.front(), CPU_SETSIZE - 1};
    auto kicker = CpuKicker::start(asked);
    REQUIRE(kicker);
    CHECK((*kicker)->cpus() == std::vector<int>{cpus.front()});
    // What was asked stays known (latgovd compares it with the online CPUs
    // to tell a change), and the refusal is named for the log.
    CHECK((*kicker)->asked() == asked);
    CHECK((*kicker)->refused().find(std::to_string(CPU_SETSIZE - 1) + " (") == 0);
    CHECK_FALSE((*kicker)->kick(CPU_SETSIZE - 1));
    CHECK((*kicker)->wakes(CPU_SETSIZE - 1).count == 0);

    auto none = CpuKicker::start({CPU_SETSIZE - 1});
    REQUIRE_FALSE(none);
    CHECK(none.error().message.find("Failed to start a thread on any CPU") != std::string::npos);
    CHECK(none.error().message.find(std::to_string(CPU_SETSIZE - 1)) != std::string::npos);
}

TEST_CASE("an update stops the threads of CPUs that went, and keeps the others (two CPUs)") {
    const auto cpus = allowed_cpus();
    REQUIRE(cpus.size() >= 2); // the test beds have 2 CPUs or more
    auto started = CpuKicker::start({cpus.front()});
    REQUIRE(started);
    auto& kicker = **started;
    REQUIRE(kicker.kick(cpus.front()));
    REQUIRE(wait_for(kicker, cpus.front(), 1).count == 1);

    // More CPUs: the first one's thread is the same (its count is kept).
    kicker.update(cpus);
    CHECK(kicker.cpus() == cpus);
    CHECK(kicker.asked() == cpus);
    CHECK(kicker.refused().empty());
    CHECK(kicker.wakes(cpus.front()).count == 1);
    for (int cpu : cpus) {
        REQUIRE(kicker.kick(cpu));
        CHECK(wait_for(kicker, cpu, cpu == cpus.front() ? 2 : 1).last_cpu == cpu);
    }

    // The first CPU goes: its thread stops, the others keep theirs.
    const std::vector<int> rest(cpus.begin() + 1, cpus.end());
    kicker.update(rest);
    CHECK(kicker.cpus() == rest);
    CHECK_FALSE(kicker.kick(cpus.front()));
    // Ended, not only forgotten (joined, or within 5 s on a loaded machine).
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (kicker_thread_id(cpus.front()) != 0 && std::chrono::steady_clock::now() < deadline)
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    CHECK(kicker_thread_id(cpus.front()) == 0);
    for (int cpu : rest)
        CHECK(kicker.wakes(cpu).count == 1);

    // A CPU that refuses a thread is named, the rest still run.
    std::vector<int> with_bad = rest;
    with_bad.push_back(CPU_SETSIZE - 1);
    kicker.update(with_bad);
    CHECK(kicker.cpus() == rest);
    CHECK(kicker.refused().find(std::to_string(CPU_SETSIZE - 1) + " (") == 0);
}

TEST_CASE("an update pins again a thread the kernel moved off its CPU (two CPUs)") {
    auto moved = thread_moved_off_its_cpu();
    auto& kicker = *moved.kicker;
    // Not kicked before the update: running, it would pin itself.
    kicker.update({moved.cpu}); // the same CPUs: it came back
    CHECK(kicker.refused().empty());
    CHECK(pinned_to(moved.tid, moved.cpu));
    REQUIRE(kicker.kick(moved.cpu));
    CHECK(wait_for(kicker, moved.cpu, 1).last_cpu == moved.cpu);
    CHECK(kicker_thread_id(moved.cpu) == moved.tid); // the same thread, pinned again
}

TEST_CASE("a thread the kernel moved off its CPU pins itself again when it next runs (two CPUs)") {
    // The CPU went offline and came back between two checks of the online
    // CPUs, so no update() follows: the thread alone can tell.
    auto moved = thread_moved_off_its_cpu();
    auto& kicker = *moved.kicker;
    REQUIRE(kicker.kick(moved.cpu));
    REQUIRE(wait_for(kicker, moved.cpu, 1).last_cpu == moved.elsewhere);
    bool pinned = false;
    for (int i = 0; i < 200 && !pinned; ++i) { // it pins itself after counting the wake
        pinned = pinned_to(moved.tid, moved.cpu);
        if (!pinned)
            std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    CHECK(pinned);
    REQUIRE(kicker.kick(moved.cpu));
    CHECK(wait_for(kicker, moved.cpu, 2).last_cpu == moved.cpu);
    CHECK(kicker_thread_id(moved.cpu) == moved.tid); // the same thread
}

TEST_CASE("an update starts again a thread that ended, and pins no other thread (two CPUs)") {
    const auto cpus = allowed_cpus();
    REQUIRE(cpus.size() >= 2); // a caller pinned to one of them is told apart
    const int cpu = cpus[0];
    const auto before = epoll_fds();
    auto started = CpuKicker::start({cpu});
    REQUIRE(started);
    auto& kicker = **started;
    const int tid = started_kicker_thread_id(cpu);
    REQUIRE(tid > 0);
    auto fds = epoll_fds();
    std::erase_if(fds, [&](int fd) { return std::count(before.begin(), before.end(), fd) > 0; });
    REQUIRE(fds.size() == 1);
    // The thread's epoll descriptor replaced by one that is not epoll: its
    // next epoll_wait fails (EINVAL), and the thread ends.
    const int null = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
    REQUIRE(null >= 0);
    REQUIRE(::dup2(null, fds[0]) == fds[0]);
    ::close(null);
    REQUIRE(kicker.kick(cpu)); // into the call that fails
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (kicker_thread_id(cpu) != 0 && std::chrono::steady_clock::now() < deadline)
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    REQUIRE(kicker_thread_id(cpu) == 0);

    cpu_set_t mine, after;
    REQUIRE(::sched_getaffinity(0, sizeof mine, &mine) == 0);
    kicker.update({cpu});
    REQUIRE(::sched_getaffinity(0, sizeof after, &after) == 0);
    // Pinning the ended thread would have pinned this one (glibc passes the
    // thread id the kernel cleared when it ended).
    CHECK(CPU_EQUAL(&mine, &after));
    if (!CPU_EQUAL(&mine, &after))
        ::sched_setaffinity(0, sizeof mine, &mine);
    const int again = started_kicker_thread_id(cpu);
    CHECK(again > 0);
    CHECK(again != tid);
    CHECK(kicker.wakes(cpu).count == 0); // a new thread counts from 0
    REQUIRE(kicker.kick(cpu));
    CHECK(wait_for(kicker, cpu, 1).count == 1);
}

TEST_CASE("a watched fd runs the handler on the thread of its CPU, there") {
    const auto cpus = allowed_cpus();
    struct Call {
        int cpu;
        int ran_on;
    };
    std::mutex mutex;
    std::vector<Call> calls;
    std::map<int, Fd> fds; // by CPU: an eventfd, read by the handler
    auto kicker = CpuKicker::start(cpus, [&](int cpu) {
        std::lock_guard lock(mutex);
        std::uint64_t value = 0;
        CHECK(::read(fds.at(cpu).get(), &value, sizeof value) == sizeof value);
        calls.push_back({cpu, ::sched_getcpu()});
    });
    REQUIRE(kicker);
    {
        std::lock_guard lock(mutex);
        for (int cpu : cpus) {
            fds[cpu] = Fd(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
            REQUIRE(fds[cpu]);
            REQUIRE((*kicker)->watch(cpu, fds[cpu].get()));
        }
    }
    const std::uint64_t one = 1;
    for (int cpu : cpus)
        REQUIRE(::write(fds.at(cpu).get(), &one, sizeof one) == sizeof one);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    for (;;) {
        {
            std::lock_guard lock(mutex);
            if (calls.size() >= cpus.size() || std::chrono::steady_clock::now() > deadline)
                break;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    std::lock_guard lock(mutex);
    REQUIRE(calls.size() == cpus.size()); // once each: the handler read its fd
    for (const auto& call : calls)
        CHECK(call.ran_on == call.cpu);
    // Ready fds are not kicks.
    for (int cpu : cpus)
        CHECK((*kicker)->wakes(cpu).count == 0);
}

TEST_CASE("nothing is watched for a CPU without a thread, or by a kicker without a handler") {
    const auto cpus = allowed_cpus();
    Fd fd(::eventfd(0, EFD_CLOEXEC));
    REQUIRE(fd);
    auto with_handler = CpuKicker::start({cpus.front()}, [](int) {});
    REQUIRE(with_handler);
    CHECK_FALSE((*with_handler)->watch(CPU_SETSIZE - 1, fd.get()));
    CHECK_FALSE((*with_handler)->watch(cpus.front(), -1)); // epoll refuses it
    auto without = CpuKicker::start({cpus.front()});
    REQUIRE(without);
    CHECK_FALSE((*without)->watch(cpus.front(), fd.get()));
}

TEST_CASE("an update does not wait for a stopping thread that is in its handler") {
    // latgovd updates the kicker under the lock its handler takes: a wait
    // for that thread would stall the loop for stop_wait on each update.
    const auto cpus = allowed_cpus();
    const int cpu = cpus.front();
    // Shared with the thread, which may outlive this test if a check fails.
    struct Shared {
        std::mutex gate;
        std::atomic<bool> entered{false}, left{false};
        Fd fd{::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)};
    };
    const auto shared = std::make_shared<Shared>();
    REQUIRE(shared->fd);
    std::unique_lock held(shared->gate);
    auto kicker = CpuKicker::start({cpu}, [shared](int) {
        shared->entered = true;
        std::lock_guard lock(shared->gate);
        std::uint64_t value = 0;
        (void)!::read(shared->fd.get(), &value, sizeof value);
        shared->left = true;
    });
    REQUIRE(kicker);
    REQUIRE((*kicker)->watch(cpu, shared->fd.get()));
    const std::uint64_t one = 1;
    REQUIRE(::write(shared->fd.get(), &one, sizeof one) == sizeof one);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (!shared->entered && std::chrono::steady_clock::now() < deadline)
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    REQUIRE(shared->entered); // and blocked on `gate`, which this thread holds

    const auto before = std::chrono::steady_clock::now();
    (*kicker)->update({}); // its CPU went away
    const auto took = std::chrono::steady_clock::now() - before;
    CHECK((*kicker)->cpus().empty());
    CHECK_FALSE(shared->left);
    // A join would have waited stop_wait (200 ms) for it.
    CHECK(took < CpuKicker::stop_wait / 2);

    // Let go, the thread finishes its handler and ends.
    held.unlock();
    while (!shared->left && std::chrono::steady_clock::now() < deadline + std::chrono::seconds(5))
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    CHECK(shared->left);
    while (kicker_thread_id(cpu) != 0 &&
           std::chrono::steady_clock::now() < deadline + std::chrono::seconds(10))
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    CHECK(kicker_thread_id(cpu) == 0);
}
