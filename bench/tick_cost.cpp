// What one governor tick costs on a large machine: IoSampler::sample,
// Governor::observe and Governor::holds, timed against a synthetic sysfs and
// procfs tree of many CPUs, NVMe controllers and queues. The tree is ordinary
// files, so the time the kernel takes to generate a big /proc/stat is not in
// these numbers; it is measured separately on the live (small) /proc/stat.
//
//   latgov_tick_cost [--cpus N] [--controllers N] [--queues N] [--ticks N]
//                    [--batches N] [--tmpdir DIR]
//
// The tree goes to --tmpdir, else $TMPDIR, else /dev/shm, else /tmp.
// Exits non-zero when discovery does not find what was generated.
#include "latgov/config.hpp"
#include "latgov/discovery.hpp"
#include "latgov/governor.hpp"
#include "latgov/parse.hpp"
#include "latgov/sampler.hpp"
#include "latgov/sysroot.hpp"

#include <algorithm>
#include <array>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fcntl.h>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <string_view>
#include <unistd.h>
#include <utility>
#include <vector>

namespace fs = std::filesystem;
using namespace latgov;
using Clock = std::chrono::steady_clock;

namespace {

// Keeps results alive so the optimiser cannot drop the work being timed.
volatile std::uint64_t sink = 0;

// This thread's CPU time: unlike the wall clock, it leaves out the time the
// thread was preempted, which on a shared 2-vCPU VM dominates the tails.
double thread_cpu_us() {
    timespec ts{};
    ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return static_cast<double>(ts.tv_sec) * 1e6 + static_cast<double>(ts.tv_nsec) / 1e3;
}

std::string loadavg() {
    std::ifstream in("/proc/loadavg");
    std::string a, b, c;
    in >> a >> b >> c;
    return a + " " + b + " " + c;
}

double us_between(Clock::time_point a, Clock::time_point b) {
    return std::chrono::duration<double, std::micro>(b - a).count();
}

struct Options {
    int cpus = 256;
    int controllers = 16;
    int queues = 64;
    int ticks = 2000;
    int batches = 10;
    std::string tmpdir;
};

std::optional<int> positive(std::string_view text) {
    int value = 0;
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (ec != std::errc{} || end != text.data() + text.size() || value <= 0)
        return std::nullopt;
    return value;
}

std::optional<Options> parse_options(int argc, char** argv) {
    Options opt;
    for (int i = 1; i < argc; ++i) {
        const std::string_view arg = argv[i];
        if (i + 1 >= argc) {
            std::fprintf(stderr, "%s: missing or unknown argument\n", argv[i]);
            return std::nullopt;
        }
        const std::string_view value = argv[++i];
        if (arg == "--tmpdir") {
            opt.tmpdir = value;
            continue;
        }
        auto number = positive(value);
        if (!number) {
            std::fprintf(stderr, "%s: expected a positive number, got \"%s\"\n", argv[i - 1],
                         argv[i]);
            return std::nullopt;
        }
        if (arg == "--cpus")
            opt.cpus = *number;
        else if (arg == "--controllers")
            opt.controllers = *number;
        else if (arg == "--queues")
            opt.queues = *number;
        else if (arg == "--ticks")
            opt.ticks = *number;
        else if (arg == "--batches")
            opt.batches = *number;
        else {
            std::fprintf(stderr, "unknown option %s\n", argv[i - 1]);
            return std::nullopt;
        }
    }
    opt.batches = std::min(opt.batches, opt.ticks);
    return opt;
}

void append_u64(std::string& out, std::uint64_t value) {
    std::array<char, 24> buf{};
    auto [end, ec] = std::to_chars(buf.data(), buf.data() + buf.size(), value);
    (void)ec;
    out.append(buf.data(), end);
}

// A file rewritten in place (same inode), as the kernel's files change under
// the sampler's open descriptors.
class Rewritable {
  public:
    explicit Rewritable(const fs::path& path) : fd_(::open(path.c_str(), O_WRONLY | O_CLOEXEC)) {}
    Rewritable(const Rewritable&) = delete;
    Rewritable& operator=(const Rewritable&) = delete;
    Rewritable(Rewritable&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
    Rewritable& operator=(Rewritable&&) = delete;
    ~Rewritable() {
        if (fd_ >= 0)
            ::close(fd_);
    }
    bool ok() const { return fd_ >= 0; }
    bool write(std::string_view text) {
        auto n = ::pwrite(fd_, text.data(), text.size(), 0);
        return n == static_cast<ssize_t>(text.size()) &&
               ::ftruncate(fd_, static_cast<off_t>(text.size())) == 0;
    }

  private:
    int fd_ = -1;
};

// The throw-away tree, removed when it goes out of scope.
class TempTree {
  public:
    explicit TempTree(const fs::path& parent) {
        std::string pattern = (parent / "latgov-tick-cost.XXXXXX").string();
        if (::mkdtemp(pattern.data()))
            root_ = pattern;
    }
    TempTree(const TempTree&) = delete;
    TempTree& operator=(const TempTree&) = delete;
    ~TempTree() {
        if (!root_.empty()) {
            std::error_code ec;
            fs::remove_all(root_, ec);
        }
    }
    bool ok() const { return !root_.empty(); }
    const fs::path& root() const { return root_; }

    void write(const std::string& rel, std::string_view text) {
        fs::create_directories((root_ / rel).parent_path());
        std::ofstream(root_ / rel) << text;
    }
    void link(const std::string& rel, const std::string& target) {
        fs::create_directories((root_ / rel).parent_path());
        fs::create_symlink(target, root_ / rel);
    }

  private:
    fs::path root_;
};

enum class Load { idle, few, all };

const char* to_string(Load load) {
    switch (load) {
    case Load::idle:
        return "idle";
    case Load::few:
        return "few";
    case Load::all:
        return "all";
    }
    return "?";
}

// The synthetic machine: what the tree says, and the counters that change
// between ticks.
class Machine {
  public:
    explicit Machine(const Options& opt)
        : cpus_(opt.cpus), controllers_(opt.controllers), queues_(opt.queues) {
        const int last = irq_of(controllers_ - 1, queues_);
        nr_irqs_ = std::max(1224, last + 64);
        irq_counts_.assign(static_cast<size_t>(nr_irqs_), 0);
        // Housekeeping IRQs tick a lot; NVMe queues have a boot history.
        irq_counts_[0] = 41;
        irq_counts_[1] = 9;
        irq_counts_[9] = 0;
        for (int n = first_nic_irq; n < first_nvme_irq; ++n)
            irq_counts_[static_cast<size_t>(n)] = 123456789ULL + static_cast<unsigned>(n) * 7919U;
        for (int c = 0; c < controllers_; ++c)
            for (int q = 0; q <= queues_; ++q)
                irq_counts_[static_cast<size_t>(irq_of(c, q))] =
                    q == 0 ? 97 + static_cast<unsigned>(c)
                           : 1000000ULL * static_cast<unsigned>(q + c + 1) + 12345ULL;
        disk_stats_.assign(static_cast<size_t>(controllers_), {});
        for (size_t d = 0; d < disk_stats_.size(); ++d) {
            auto& s = disk_stats_[d];
            s = {81234567, 1234,     654321098, 30123456, 9876543, 4321, 123456789, 45678901, 0,
                 20345678, 75802357, 0,         0,        0,       0,    4567,      3456};
            s[0] += d * 1000;
        }
        cpu_times_.assign(static_cast<size_t>(cpus_) * 10, 0);
        for (size_t i = 0; i < cpu_times_.size(); ++i)
            cpu_times_[i] = (i % 10 == 3) ? 912345678ULL + i : (i % 10 < 3 ? 1234567ULL + i : 0);
    }

    int controllers() const { return controllers_; }
    int queues() const { return queues_; }
    static constexpr int first_nic_irq = 24;
    static constexpr int first_nvme_irq = 120;
    // Queue q of controller c (q = 0: admin) -> IRQ number.
    int irq_of(int c, int q) const { return first_nvme_irq + c * (queues_ + 1) + q; }

    // The CPUs submitting to hardware queue `hctx`: four per queue, wrapping
    // around on a machine with fewer CPUs than queues x 4.
    CpuSet queue_cpus(int hctx) const {
        CpuSet set;
        for (int k = 0; k < 4; ++k)
            set.push_back((hctx * 4 + k) % cpus_);
        std::sort(set.begin(), set.end());
        set.erase(std::unique(set.begin(), set.end()), set.end());
        return set;
    }

    void build(TempTree& tree) const {
        const std::string cpu_dir = "sys/devices/system/cpu";
        tree.write(cpu_dir + "/online", "0-" + std::to_string(cpus_ - 1) + "\n");
        tree.write(cpu_dir + "/possible", "0-" + std::to_string(cpus_ - 1) + "\n");
        tree.write(cpu_dir + "/cpuidle/current_driver", "intel_idle\n");
        tree.write(cpu_dir + "/cpuidle/current_governor_ro", "menu\n");
        tree.write(cpu_dir + "/cpuidle/current_governor", "menu\n");
        static constexpr std::array<std::pair<const char*, const char*>, 4> states{{
            {"POLL", "0"},
            {"C1", "1"},
            {"C1E", "4"},
            {"C6", "170"},
        }};
        static constexpr std::array<const char*, 4> residency{"0", "1", "8", "600"};
        for (int cpu = 0; cpu < cpus_; ++cpu) {
            const std::string dir = cpu_dir + "/cpu" + std::to_string(cpu);
            tree.write(dir + "/power/pm_qos_resume_latency_us", "0\n");
            for (size_t s = 0; s < states.size(); ++s) {
                const std::string st = dir + "/cpuidle/state" + std::to_string(s);
                tree.write(st + "/name", std::string(states[s].first) + "\n");
                tree.write(st + "/latency", std::string(states[s].second) + "\n");
                tree.write(st + "/residency", std::string(residency[s]) + "\n");
                tree.write(st + "/disable", "0\n");
            }
        }

        // Non-NVMe interrupts, so the IRQ directory is as crowded as a server's.
        static constexpr std::array<const char*, 16> legacy{
            "timer", "i8042", "", "", "ttyS0", "", "", "",
            "rtc0",  "acpi",  "", "", "i8042", "", "", ""};
        for (int n = 0; n < 16; ++n)
            if (*legacy[static_cast<size_t>(n)])
                irq(tree, n, legacy[static_cast<size_t>(n)], "0-" + std::to_string(cpus_ - 1), "0");
        for (int n = first_nic_irq; n < first_nvme_irq; ++n)
            irq(tree, n, "eth0-TxRx-" + std::to_string(n - first_nic_irq),
                std::to_string((n - first_nic_irq) % cpus_),
                std::to_string((n - first_nic_irq) % cpus_));
        for (int n = irq_of(controllers_ - 1, queues_) + 1; n < nr_irqs_; ++n)
            irq(tree, n, "eth1-TxRx-" + std::to_string(n), std::to_string(n % cpus_),
                std::to_string(n % cpus_));

        for (int c = 0; c < controllers_; ++c) {
            const std::string ctrl = "nvme" + std::to_string(c);
            const std::string disk = ctrl + "n1";
            const std::string pci = "0000:" + hex2(c + 1) + ":00.0";
            const std::string ctrl_dir =
                "sys/devices/pci0000:00/0000:00:" + hex2(c + 1) + ".0/" + pci + "/nvme/" + ctrl;
            tree.write(ctrl_dir + "/transport", "pcie\n");
            tree.write(ctrl_dir + "/address", pci + "\n");
            tree.write(ctrl_dir + "/model", "SYNTH NVMe 3.84TB                       \n");
            tree.write(ctrl_dir + "/serial", "SYN" + std::to_string(100000 + c) + "        \n");
            tree.write(ctrl_dir + "/firmware_rev", "1.0.0   \n");
            tree.write(ctrl_dir + "/subsysnqn", "nqn.2024-01.com.example:synth-" + ctrl + "\n");
            tree.write(ctrl_dir + "/state", "live\n");
            tree.write(ctrl_dir + "/queue_count", std::to_string(queues_ + 1) + "\n");
            tree.write(ctrl_dir + "/cntlid", std::to_string(c + 1) + "\n");
            tree.link("sys/class/nvme/" + ctrl, "../../devices/pci0000:00/0000:00:" + hex2(c + 1) +
                                                    ".0/" + pci + "/nvme/" + ctrl);

            const std::string disk_dir = ctrl_dir + "/" + disk;
            tree.write(disk_dir + "/dev", "259:" + std::to_string(c) + "\n");
            tree.write(disk_dir + "/nsid", "1\n");
            tree.write(disk_dir + "/wwid", "eui.00000000000000" + hex2(c) + "\n");
            tree.write(disk_dir + "/stat", disk_stat(static_cast<size_t>(c)));
            tree.link(disk_dir + "/device", "../../" + ctrl);
            tree.link("sys/block/" + disk, "../" + disk_dir.substr(std::string("sys/").size()));
            for (int h = 0; h < queues_; ++h) {
                const CpuSet cpus = queue_cpus(h);
                std::string list;
                for (int cpu : cpus)
                    list += (list.empty() ? "" : ", ") + std::to_string(cpu);
                tree.write(disk_dir + "/mq/" + std::to_string(h) + "/cpu_list", list + "\n");
                // Managed IRQ: masked to the queue's CPUs, delivered on one.
                const int effective = cpus[static_cast<size_t>(c) % cpus.size()];
                irq(tree, irq_of(c, h + 1), ctrl + "q" + std::to_string(h + 1),
                    format_cpu_list(cpus), std::to_string(effective));
            }
            irq(tree, irq_of(c, 0), ctrl + "q0", "0-" + std::to_string(cpus_ - 1), "0");
        }
        tree.write("proc/stat", proc_stat());
    }

    // Moves the counters on by one tick of the given load.
    void advance(Load load, long tick) {
        irq_counts_[0] += 5; // the local timer, every tick
        for (int n = first_nic_irq; n < first_nvme_irq; n += 7)
            irq_counts_[static_cast<size_t>(n)] += 3;
        for (size_t i = 3; i < cpu_times_.size(); i += 10)
            cpu_times_[i] += 1;
        ctxt_ += 40000;
        processes_ += 3;
        if (load == Load::idle)
            return;
        if (load == Load::all) {
            for (int c = 0; c < controllers_; ++c) {
                for (int q = 1; q <= queues_; ++q)
                    irq_counts_[static_cast<size_t>(irq_of(c, q))] += 17;
                io(static_cast<size_t>(c), static_cast<std::uint64_t>(queues_) * 17);
            }
            return;
        }
        // A few queues of a few controllers, rotating.
        const int busy_ctrls = std::max(1, controllers_ / 8);
        const int busy_queues = std::max(1, queues_ / 8);
        for (int j = 0; j < busy_ctrls; ++j) {
            const int c = static_cast<int>((tick * busy_ctrls + j) % controllers_);
            for (int k = 0; k < busy_queues; ++k) {
                const int q = static_cast<int>((tick * busy_queues + k) % queues_) + 1;
                irq_counts_[static_cast<size_t>(irq_of(c, q))] += 9;
            }
            io(static_cast<size_t>(c), static_cast<std::uint64_t>(busy_queues) * 9);
        }
    }

    size_t active_queues(Load load) const {
        switch (load) {
        case Load::idle:
            return 0;
        case Load::all:
            return static_cast<size_t>(controllers_) * static_cast<size_t>(queues_);
        case Load::few:
            return static_cast<size_t>(std::max(1, controllers_ / 8)) *
                   static_cast<size_t>(std::max(1, queues_ / 8));
        }
        return 0;
    }

    std::string disk_stat(size_t d) const {
        std::string out;
        char buf[32];
        for (size_t i = 0; i < 17; ++i) {
            std::snprintf(buf, sizeof buf, "%8llu",
                          static_cast<unsigned long long>(disk_stats_[d][i]));
            out += buf;
            out += i + 1 < 17 ? ' ' : '\n';
        }
        return out;
    }

    // As fs/proc/stat.c lays it out.
    std::string proc_stat() const {
        std::string out;
        out.reserve(static_cast<size_t>(cpus_) * 80 + static_cast<size_t>(nr_irqs_) * 4 + 512);
        std::array<std::uint64_t, 10> total{};
        for (size_t i = 0; i < cpu_times_.size(); ++i)
            total[i % 10] += cpu_times_[i];
        out += "cpu ";
        for (auto v : total) {
            out += ' ';
            append_u64(out, v);
        }
        out += '\n';
        for (int cpu = 0; cpu < cpus_; ++cpu) {
            out += "cpu";
            append_u64(out, static_cast<std::uint64_t>(cpu));
            for (size_t f = 0; f < 10; ++f) {
                out += ' ';
                append_u64(out, cpu_times_[static_cast<size_t>(cpu) * 10 + f]);
            }
            out += '\n';
        }
        std::uint64_t sum = 0;
        for (auto v : irq_counts_)
            sum += v;
        out += "intr ";
        append_u64(out, sum);
        for (auto v : irq_counts_) {
            out += ' ';
            append_u64(out, v);
        }
        out += "\nctxt ";
        append_u64(out, ctxt_);
        out += "\nbtime 1732950000\nprocesses ";
        append_u64(out, processes_);
        out += "\nprocs_running 3\nprocs_blocked 0\n";
        out += "softirq 987654321 12 345678901 23456 7890123 456789 0 34567 234567890 0 "
               "123456789\n";
        return out;
    }

    size_t nr_irqs() const { return static_cast<size_t>(nr_irqs_); }

  private:
    static std::string hex2(int n) {
        char buf[8];
        std::snprintf(buf, sizeof buf, "%02x", n & 0xff);
        return buf;
    }
    static void irq(TempTree& tree, int n, const std::string& name, const std::string& affinity,
                    const std::string& effective) {
        tree.write("sys/kernel/irq/" + std::to_string(n) + "/actions", name + "\n");
        tree.write("proc/irq/" + std::to_string(n) + "/smp_affinity_list", affinity + "\n");
        tree.write("proc/irq/" + std::to_string(n) + "/effective_affinity_list", effective + "\n");
    }
    void io(size_t d, std::uint64_t ios) {
        auto& s = disk_stats_[d];
        s[0] += ios;       // reads completed
        s[2] += ios * 8;   // sectors read
        s[3] += ios / 10;  // ms reading (~100 us each)
        s[9] += 5;         // io_ticks
        s[10] += ios / 10; // time in queue
    }

    int cpus_;
    int controllers_;
    int queues_;
    int nr_irqs_ = 0;
    std::vector<std::uint64_t> irq_counts_;
    std::vector<std::array<std::uint64_t, 17>> disk_stats_;
    std::vector<std::uint64_t> cpu_times_;
    std::uint64_t ctxt_ = 98765432109ULL;
    std::uint64_t processes_ = 4567890;
};

struct Stats {
    double median = 0;
    double p90 = 0;
    double p99 = 0;
    double max = 0;
    double mean = 0;
};

Stats summarize(std::vector<double> values) {
    Stats s;
    if (values.empty())
        return s;
    std::sort(values.begin(), values.end());
    auto at = [&](double p) {
        auto rank = static_cast<size_t>(std::ceil(p * static_cast<double>(values.size())));
        return values[std::clamp<size_t>(rank, 1, values.size()) - 1];
    };
    s.median = at(0.5);
    s.p90 = at(0.9);
    s.p99 = at(0.99);
    s.max = values.back();
    double sum = 0;
    for (double v : values)
        sum += v;
    s.mean = sum / static_cast<double>(values.size());
    return s;
}

void print_row(const char* label, const Stats& s) {
    std::printf("  %-22s %9.1f %9.1f %9.1f %9.1f %9.1f\n", label, s.median, s.p90, s.p99, s.max,
                s.mean);
}

void print_header() {
    std::printf("  %-22s %9s %9s %9s %9s %9s\n", "us per tick", "median", "p90", "p99", "max",
                "mean");
}

// Times `body` `reps` times, one sample each.
template <typename F>
Stats time_each(int reps, F body) {
    std::vector<double> us;
    us.reserve(static_cast<size_t>(reps));
    for (int i = 0; i < reps; ++i) {
        auto t0 = Clock::now();
        body();
        auto t1 = Clock::now();
        us.push_back(us_between(t0, t1));
    }
    return summarize(std::move(us));
}

// Did discovery find every generated controller, namespace and queue?
bool check_topology(const Topology& topo, const Machine& m, const Governor& governor) {
    bool ok = true;
    auto fail = [&](const std::string& what) {
        std::fprintf(stderr, "discovery mismatch: %s\n", what.c_str());
        ok = false;
    };
    if (topo.controllers.size() != static_cast<size_t>(m.controllers()))
        fail("found " + std::to_string(topo.controllers.size()) + " controllers, generated " +
             std::to_string(m.controllers()));
    for (int c = 0; c < m.controllers(); ++c) {
        const std::string ctrl = "nvme" + std::to_string(c);
        const BlockDevice* disk = topo.device(ctrl + "n1");
        if (!disk) {
            fail(ctrl + "n1 not found");
            continue;
        }
        if (disk->kind != DeviceKind::nvme || disk->controller != ctrl)
            fail(disk->name + " not seen as a namespace of " + ctrl);
        if (disk->queues.size() != static_cast<size_t>(m.queues())) {
            fail(disk->name + " has " + std::to_string(disk->queues.size()) +
                 " queues, generated " + std::to_string(m.queues()));
            continue;
        }
        for (int h = 0; h < m.queues(); ++h) {
            const auto& q = disk->queues[static_cast<size_t>(h)];
            if (q.irq != m.irq_of(c, h + 1) ||
                q.completion_source != CompletionSource::irq_effective_affinity ||
                q.submit_cpus != m.queue_cpus(h))
                fail(disk->name + " queue " + std::to_string(h) + " not matched to its IRQ");
        }
    }
    size_t governed = 0;
    for (const auto& d : governor.devices())
        governed += d.queues.size();
    const size_t expected = static_cast<size_t>(m.controllers()) * static_cast<size_t>(m.queues());
    if (governed != expected)
        fail("governor governs " + std::to_string(governed) + " queues, expected " +
             std::to_string(expected));
    if (governor.stat_sources().size() != static_cast<size_t>(m.controllers()))
        fail("governor reads " + std::to_string(governor.stat_sources().size()) +
             " stat files, expected " + std::to_string(m.controllers()));
    return ok;
}

struct TickTimes {
    std::vector<double> total, sample, observe, holds, cpu;
    std::vector<double> percpu;
};

int run(const Options& opt) {
    fs::path parent = opt.tmpdir;
    if (parent.empty()) {
        // tmpfs when there is one: some ten thousand small files are slow to
        // create and remove on a VM's disk, and the reads come from the page
        // cache either way.
        const char* env = std::getenv("TMPDIR");
        std::error_code ec;
        parent = env && *env ? env : fs::is_directory("/dev/shm", ec) ? "/dev/shm" : "/tmp";
    }
    TempTree tree(parent);
    if (!tree.ok()) {
        std::fprintf(stderr, "cannot create a temporary directory in %s: %s\n", parent.c_str(),
                     std::strerror(errno));
        return 1;
    }
    Machine machine(opt);
    auto build_start = Clock::now();
    machine.build(tree);
    auto build_end = Clock::now();

    std::printf("latgov tick cost: %d CPUs, %d controllers x %d queues, %zu IRQs in intr, "
                "tree in %s (built in %.0f ms)\n",
                opt.cpus, opt.controllers, opt.queues, machine.nr_irqs(), tree.root().c_str(),
                us_between(build_start, build_end) / 1000.0);
    std::printf("load average at the start: %s\n", loadavg().c_str());

    const SysRoot root(tree.root());
    auto discover_start = Clock::now();
    auto topo = discover_topology(root);
    auto discover_end = Clock::now();
    if (!topo) {
        std::fprintf(stderr, "discovery failed: %s\n", topo.error().message.c_str());
        return 1;
    }
    for (const auto& w : topo->warnings)
        std::fprintf(stderr, "discovery warning: %s\n", w.c_str());
    Governor governor(*topo, default_config(), declared_costs(*topo));
    if (!check_topology(*topo, machine, governor))
        return 1;
    auto sampler = IoSampler::open(root, governor.stat_sources());
    if (!sampler) {
        std::fprintf(stderr, "%s\n", sampler.error().message.c_str());
        return 1;
    }
    std::printf("discover_topology: %.1f ms (one-off, at start and on rescan)\n",
                us_between(discover_start, discover_end) / 1000.0);

    Rewritable proc_stat(tree.root() / "proc/stat");
    std::vector<Rewritable> disk_stats;
    for (const auto& name : governor.stat_sources())
        disk_stats.emplace_back(tree.root() / "sys/block" / name / "stat");
    bool writable = proc_stat.ok();
    for (const auto& f : disk_stats)
        writable = writable && f.ok();
    if (!writable) {
        std::fprintf(stderr, "cannot open the synthetic stat files for writing\n");
        return 1;
    }
    // Sampler order is stat_sources order: nvme0n1, nvme1n1, nvme10n1, ... by
    // name; map each back to its controller.
    std::vector<size_t> disk_of;
    for (const auto& name : governor.stat_sources())
        disk_of.push_back(static_cast<size_t>(std::stoi(name.substr(4))));

    auto publish = [&]() {
        bool ok = proc_stat.write(machine.proc_stat());
        for (size_t i = 0; i < disk_stats.size(); ++i)
            ok = disk_stats[i].write(machine.disk_stat(disk_of[i])) && ok;
        return ok;
    };

    IoSample sample;
    // Ticks as the daemon spaces them while active; `now` is synthetic so
    // linger behaves as it would at that rate.
    const auto interval = default_config().daemon.sample_interval;
    TimePoint now{};
    long tick = 0;
    std::string failure;
    size_t last_held = 0;
    auto one_tick = [&](Load load, TickTimes* out) {
        machine.advance(load, tick++);
        if (!publish()) {
            failure = "rewriting the synthetic stat files failed";
            return false;
        }
        now += interval;
        const double c0 = thread_cpu_us();
        auto t0 = Clock::now();
        auto sampled = sampler->sample(sample);
        auto t1 = Clock::now();
        const bool changed = governor.observe(sample, now);
        auto t2 = Clock::now();
        size_t held = last_held;
        if (changed) { // as the daemon does: holds are recomputed only on a change
            Holds holds = governor.holds();
            held = holds.percpu.size();
            last_held = held;
        } // destroyed inside the timed region, as it is in the daemon
        auto t3 = Clock::now();
        const double c1 = thread_cpu_us();
        sink = sink + held;
        if (!sampled) {
            failure = sampled.error().message;
            return false;
        }
        if (out) {
            out->total.push_back(us_between(t0, t3));
            out->cpu.push_back(c1 - c0);
            out->sample.push_back(us_between(t0, t1));
            out->observe.push_back(us_between(t1, t2));
            out->holds.push_back(us_between(t2, t3));
            out->percpu.push_back(static_cast<double>(held));
        }
        return true;
    };

    // Warm-up: fills the baseline and grows the read buffers.
    for (int i = 0; i < 20; ++i)
        if (!one_tick(Load::few, nullptr)) {
            std::fprintf(stderr, "tick failed: %s\n", failure.c_str());
            return 1;
        }

    constexpr std::array<Load, 3> loads{Load::idle, Load::few, Load::all};
    std::array<TickTimes, 3> times;
    const int per_batch = std::max(1, opt.ticks / opt.batches);
    for (int b = 0; b < opt.batches; ++b) {
        for (size_t l = 0; l < loads.size(); ++l) {
            // The first tick after a change of load is a transition (queues
            // of the previous load release): not counted.
            for (int i = 0; i <= per_batch; ++i)
                if (!one_tick(loads[l], i == 0 ? nullptr : &times[l])) {
                    std::fprintf(stderr, "tick failed: %s\n", failure.c_str());
                    return 1;
                }
        }
    }

    std::printf("\nPer tick (sample + observe + holds), %d ticks per load in %d interleaved "
                "batches:\n",
                per_batch * opt.batches, opt.batches);
    std::array<Stats, 3> totals;
    std::array<Stats, 3> cpu_totals;
    for (size_t l = 0; l < loads.size(); ++l) {
        const auto& t = times[l];
        totals[l] = summarize(t.total);
        std::printf("\nload %-4s: %zu queues see IO per tick, %.0f CPUs held on median\n",
                    to_string(loads[l]), machine.active_queues(loads[l]),
                    summarize(t.percpu).median);
        print_header();
        print_row("total", totals[l]);
        cpu_totals[l] = summarize(t.cpu);
        print_row("total, thread CPU time", cpu_totals[l]);
        print_row("sample", summarize(t.sample));
        print_row("observe", summarize(t.observe));
        print_row("holds", summarize(t.holds));
        std::vector<double> oh(t.observe.size());
        for (size_t i = 0; i < oh.size(); ++i)
            oh[i] = t.observe[i] + t.holds[i];
        print_row("observe+holds", summarize(oh));
    }

    // --- Where the sample time goes ------------------------------------------
    const int reps = 2000;
    std::printf("\nParts of sample() on the synthetic tree (%d reps each, last load's files):\n",
                reps);
    print_header();
    auto stat_file = PreadFile::open(root, "/proc/stat");
    if (!stat_file) {
        std::fprintf(stderr, "%s\n", stat_file.error().message.c_str());
        return 1;
    }
    std::string synthetic_text;
    print_row("pread /proc/stat", time_each(reps, [&] {
                  auto text = stat_file->read();
                  if (text)
                      sink = sink + text->size();
              }));
    if (auto text = stat_file->read())
        synthetic_text = std::string(*text);
    std::vector<std::uint64_t> counts;
    print_row("parse_stat_intr", time_each(reps, [&] {
                  if (parse_stat_intr(synthetic_text, counts))
                      sink = sink + counts.size();
              }));
    std::vector<PreadFile> disk_files;
    for (const auto& name : governor.stat_sources())
        if (auto f = PreadFile::open(root, "/sys/block/" + name + "/stat"))
            disk_files.push_back(std::move(*f));
    print_row("pread all disk stats", time_each(reps, [&] {
                  for (auto& f : disk_files)
                      if (auto text = f.read())
                          sink = sink + text->size();
              }));
    print_row("parse all disk stats", time_each(reps, [&] {
                  for (auto& f : disk_files)
                      if (auto text = f.read())
                          if (auto s = parse_block_stat(*text))
                              sink = sink + s->read_ios;
              }));
    // What observe() does besides the queue loop: copy the sample as the next
    // baseline.
    IoSample baseline = sample;
    print_row("IoSample copy", time_each(reps, [&] {
                  baseline = sample;
                  sink = sink + baseline.irq_counts.size();
              }));
    std::printf("  synthetic /proc/stat: %zu bytes\n", synthetic_text.size());

    // --- Where the holds() time goes with every queue active ------------------
    // (The last batch ran the "all" load, so every queue is still active.)
    // holds() asks limit_for() (a map lookup and choose_limit) once per active
    // queue and completion CPU, builds one QueueDemand each (with a one-CPU
    // vector), then aggregates. The same steps through the public functions:
    const auto costs = declared_costs(*topo);
    const auto kind = idle_governor_kind(topo->cpuidle_driver, topo->cpuidle_governor);
    size_t pairs = 0;
    for (const auto& d : governor.devices())
        for (const auto& q : d.queues)
            pairs += q.cpus.size();
    std::printf("\nParts of holds() with all %zu queue x completion-CPU pairs active, %d reps:\n",
                pairs, reps);
    print_header();
    print_row("limit per pair", time_each(reps, [&] {
                  for (const auto& d : governor.devices())
                      for (const auto& q : d.queues)
                          for (int cpu : q.cpus) {
                              auto it = costs.find(cpu);
                              if (it == costs.end())
                                  continue;
                              auto limit = choose_limit(d.policy, d.latency.mean_us(), d.transport,
                                                        it->second, kind);
                              sink = sink + limit.value_or(1);
                          }
              }));
    print_row("holds(), whole", time_each(reps, [&] {
                  Holds held = governor.holds();
                  sink = sink + held.percpu.size();
              }));
    std::vector<QueueDemand> demands;
    print_row("build demands", time_each(reps, [&] {
                  std::vector<QueueDemand> built;
                  for (const auto& d : governor.devices())
                      for (const auto& q : d.queues)
                          for (int cpu : q.cpus)
                              built.push_back({{d.name, q.index}, {cpu}, LatencyLimit{4}});
                  sink = sink + built.size();
                  demands = std::move(built);
              }));
    print_row("aggregate_cpu_limits", time_each(reps, [&] {
                  auto held = aggregate_cpu_limits(demands);
                  sink = sink + held.size();
              }));

    // --- The live machine's /proc/stat ---------------------------------------
    std::printf("\nLive /proc/stat on this host (%ld CPUs online), %d reps:\n",
                ::sysconf(_SC_NPROCESSORS_ONLN), reps);
    print_header();
    auto live = PreadFile::open(SysRoot("/"), "/proc/stat");
    if (!live) {
        std::fprintf(stderr, "%s\n", live.error().message.c_str());
        return 1;
    }
    std::string live_text;
    print_row("pread (kernel generates)", time_each(reps, [&] {
                  auto text = live->read();
                  if (text)
                      sink = sink + text->size();
              }));
    if (auto text = live->read())
        live_text = std::string(*text);
    tree.write("live-proc-stat", live_text);
    auto live_copy = PreadFile::open(SysRoot(tree.root()), "/live-proc-stat");
    if (live_copy)
        print_row("pread same bytes, file", time_each(reps, [&] {
                      auto text = live_copy->read();
                      if (text)
                          sink = sink + text->size();
                  }));
    size_t live_irqs = 0;
    print_row("parse_stat_intr", time_each(reps, [&] {
                  if (parse_stat_intr(live_text, counts)) {
                      live_irqs = counts.size();
                      sink = sink + counts.size();
                  }
              }));
    std::printf("  live /proc/stat: %zu bytes, %zu IRQs in intr\n", live_text.size(), live_irqs);

    // --- CPU cost ------------------------------------------------------------
    const double active_us = static_cast<double>(std::chrono::microseconds(interval).count());
    const double idle_us = static_cast<double>(
        std::chrono::microseconds(default_config().daemon.idle_interval).count());
    std::printf("\nCPU cost as %% of one core: mean thread CPU time per tick / interval "
                "(wall-clock median in brackets):\n");
    for (size_t l = 0; l < loads.size(); ++l)
        std::printf("  load %-4s: %7.3f%% (%7.3f%%) at the %lld ms active tick, %7.4f%% "
                    "(%7.4f%%) at the %lld ms idle tick\n",
                    to_string(loads[l]), 100.0 * cpu_totals[l].mean / active_us,
                    100.0 * totals[l].median / active_us, static_cast<long long>(interval.count()),
                    100.0 * cpu_totals[l].mean / idle_us, 100.0 * totals[l].median / idle_us,
                    static_cast<long long>(default_config().daemon.idle_interval.count()));
    std::printf("load average at the end: %s\n", loadavg().c_str());
    return 0;
}

} // namespace

int main(int argc, char** argv) {
    auto opt = parse_options(argc, argv);
    if (!opt)
        return 2;
    return run(*opt);
}
