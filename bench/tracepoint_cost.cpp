// What a perf tracepoint event costs each hit, by how latgovd could use it:
// counting (its per-CPU request counters), sampling into a paused ring (a
// wake-up event armed with PERF_EVENT_IOC_PAUSE_OUTPUT instead of being
// disabled) and sampling bare headers into a ring (counts read without
// read()). A disabled event is not on the tracepoint's list and costs
// nothing. A block request cannot be issued a million times cheaply, so the
// event sits on syscalls/sys_enter_getppid, filtered as latgovd filters
// (a number and a pid test), and this thread calls getppid() on CPU 0; the
// time per call less the time with no event is the cost per hit. A hit the
// filter leaves out (a request of a disk the event does not watch) is
// measured too.
//
//   latgov_tracepoint_cost [--calls N] [--rounds N]
//
// Needs root (or CAP_PERFMON) and tracefs. Prints the median over rounds of
// each configuration, in ns per call, and exits non-zero when an event
// cannot be opened.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <linux/perf_event.h>
#include <sched.h>
#include <string>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <vector>

namespace {

enum class Kind { counting, counting_left_out, paused_sample, disabled_sample, bare_sample };

struct Event {
    int fd = -1;
    void* ring = nullptr;
    bool consumed = false; // its records are read (bare samples), not left to fill it
};

constexpr std::size_t ring_bytes = 5 * 4096; // a page of metadata, 4 of data

long tracepoint_id() {
    for (const char* dir : {"/sys/kernel/tracing", "/sys/kernel/debug/tracing"}) {
        std::ifstream in(std::string(dir) + "/events/syscalls/sys_enter_getppid/id");
        long id = -1;
        if (in >> id)
            return id;
    }
    return -1;
}

Event open_event(long id, Kind kind) {
    perf_event_attr attr{};
    attr.size = sizeof attr;
    attr.type = PERF_TYPE_TRACEPOINT;
    attr.config = static_cast<std::uint64_t>(id);
    if (kind == Kind::paused_sample || kind == Kind::disabled_sample) {
        attr.disabled = kind == Kind::disabled_sample;
        attr.sample_period = 1;
        attr.sample_type = PERF_SAMPLE_TIME | PERF_SAMPLE_RAW;
        attr.wakeup_events = 1;
    } else if (kind == Kind::bare_sample) {
        attr.sample_period = 1;
        attr.watermark = 1;
        attr.wakeup_watermark = 4 * 4096;
    }
    Event e;
    e.consumed = kind == Kind::bare_sample;
    e.fd = static_cast<int>(::syscall(SYS_perf_event_open, &attr, -1, 0, -1, 0));
    if (e.fd < 0) {
        std::perror("perf_event_open");
        std::exit(1);
    }
    // counting_left_out: a filter no call matches, as a request of a disk
    // the filter leaves out.
    const char* filter = kind == Kind::counting_left_out ? "__syscall_nr == 1 && common_pid != 1"
                                                         : "__syscall_nr != 1 && common_pid != 1";
    if (::ioctl(e.fd, PERF_EVENT_IOC_SET_FILTER, filter) != 0) {
        std::perror("PERF_EVENT_IOC_SET_FILTER");
        std::exit(1);
    }
    if (kind != Kind::counting) {
        e.ring = ::mmap(nullptr, ring_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, e.fd, 0);
        if (e.ring == MAP_FAILED) {
            std::perror("mmap");
            std::exit(1);
        }
        if (kind == Kind::paused_sample && ::ioctl(e.fd, PERF_EVENT_IOC_PAUSE_OUTPUT, 1) != 0) {
            std::perror("PERF_EVENT_IOC_PAUSE_OUTPUT");
            std::exit(1);
        }
    }
    return e;
}

void close_event(Event& e) {
    if (e.ring) // the mapping holds the event: unmapped first, or it lives on
        ::munmap(e.ring, ring_bytes);
    ::close(e.fd);
}

// Consumes what the kernel wrote to a ring, as a reader of its counts would:
// a full ring would take the cheaper path of a lost record instead.
void consume(const Event& e) {
    auto* page = static_cast<perf_event_mmap_page*>(e.ring);
    const std::uint64_t head = __atomic_load_n(&page->data_head, __ATOMIC_ACQUIRE);
    __atomic_store_n(&page->data_tail, head, __ATOMIC_RELEASE);
}

// The ring of bare samples holds 2048 records: consumed every 256 calls.
constexpr long consume_every = 256;

double ns_per_call(long calls, const std::vector<Event>& events) {
    const auto start = std::chrono::steady_clock::now();
    for (long i = 0; i < calls; ++i) {
        ::syscall(SYS_getppid);
        if (i % consume_every == consume_every - 1)
            for (const auto& e : events)
                if (e.consumed)
                    consume(e);
    }
    const std::chrono::duration<double, std::nano> took = std::chrono::steady_clock::now() - start;
    return took.count() / static_cast<double>(calls);
}

} // namespace

int main(int argc, char** argv) {
    long calls = 1000000;
    int rounds = 7;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (std::strcmp(argv[i], "--calls") == 0)
            calls = std::atol(argv[i + 1]);
        else if (std::strcmp(argv[i], "--rounds") == 0)
            rounds = std::atoi(argv[i + 1]);
    }
    if (calls < 1 || rounds < 1) {
        std::fprintf(stderr, "--calls and --rounds take a positive number\n");
        return 2;
    }
    const long id = tracepoint_id();
    if (id < 0) {
        std::fprintf(stderr, "no syscalls/sys_enter_getppid in tracefs\n");
        return 1;
    }
    cpu_set_t cpu0;
    CPU_ZERO(&cpu0);
    CPU_SET(0, &cpu0);
    if (::sched_setaffinity(0, sizeof cpu0, &cpu0) != 0) { // the events watch this thread's CPU
        std::perror("sched_setaffinity to cpu 0");
        return 1;
    }

    struct Config {
        const char* name;
        std::vector<Kind> events;
    };
    const std::vector<Config> configs = {
        {"no event", {}},
        {"counting", {Kind::counting}},
        {"counting, hit left out by its filter", {Kind::counting_left_out}},
        {"paused sample ring", {Kind::paused_sample}},
        {"bare sample ring", {Kind::bare_sample}},
        {"counting + disabled sample (latgovd)", {Kind::counting, Kind::disabled_sample}},
        {"bare ring + paused (no interrupts)", {Kind::bare_sample, Kind::paused_sample}},
    };
    std::vector<std::vector<double>> times(configs.size());
    for (int r = 0; r < rounds; ++r) // interleaved: each round runs every configuration
        for (std::size_t c = 0; c < configs.size(); ++c) {
            std::vector<Event> events;
            for (Kind k : configs[c].events)
                events.push_back(open_event(id, k));
            times[c].push_back(ns_per_call(calls, events));
            for (auto& e : events)
                close_event(e);
        }
    std::printf("%-40s %12s %12s\n", "configuration", "ns/call", "ns/hit");
    double none = 0;
    for (std::size_t c = 0; c < configs.size(); ++c) {
        auto& t = times[c];
        std::sort(t.begin(), t.end());
        const double median = t[t.size() / 2];
        if (c == 0)
            none = median;
        std::printf("%-40s %12.1f %12.1f\n", configs[c].name, median, median - none);
    }
    return 0;
}
