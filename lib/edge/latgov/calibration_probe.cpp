#include "latgov/calibration_probe.hpp"

#include "latgov/config.hpp"
#include "latgov/discovery.hpp"
#include "latgov/fd.hpp"
#include "latgov/governor.hpp"
#include "latgov/pinned_thread.hpp"
#include "latgov/qos.hpp"
#include "latgov/runtime_dir.hpp"

#include <algorithm>
#include <cerrno>
#include <ctime>
#include <exception>
#include <fcntl.h>
#include <liburing.h>
#include <linux/fs.h>
#include <random>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

namespace latgov {

namespace {

double now_us() {
    timespec ts{};
    ::clock_gettime(CLOCK_MONOTONIC, &ts);
    return static_cast<double>(ts.tv_sec) * 1e6 + static_cast<double>(ts.tv_nsec) / 1e3;
}

class Ring {
  public:
    explicit Ring(unsigned depth) { ok_ = io_uring_queue_init(depth, &ring_, 0) == 0; }
    ~Ring() {
        if (ok_)
            io_uring_queue_exit(&ring_);
    }
    Ring(const Ring&) = delete;
    Ring& operator=(const Ring&) = delete;
    bool ok() const { return ok_; }

    // One read at QD1; its completion latency in microseconds.
    Result<double> read(int fd, void* buffer, unsigned size, std::uint64_t offset) {
        io_uring_sqe* sqe = io_uring_get_sqe(&ring_);
        if (!sqe) // cannot happen at QD1, but the compiler cannot know
            return make_error("io_uring submission queue full");
        io_uring_prep_read(sqe, fd, buffer, size, offset);
        const double start = now_us();
        io_uring_submit(&ring_);
        io_uring_cqe* cqe = nullptr;
        int rc;
        while ((rc = io_uring_wait_cqe(&ring_, &cqe)) == -EINTR) {
        }
        const double end = now_us();
        if (rc < 0)
            return make_error("io_uring_wait_cqe: " + errno_message(-rc));
        const int res = cqe->res;
        io_uring_cqe_seen(&ring_, cqe);
        if (res < 0)
            return make_error("read: " + errno_message(-res));
        return end - start;
    }

  private:
    io_uring ring_{};
    bool ok_ = false;
};

// The disk a file lives on: /sys/dev/block/MAJ:MIN, or its parent for a
// partition.
Result<std::string> disk_of_file(const SysRoot& root, const std::filesystem::path& file) {
    struct stat st {};
    if (::stat(file.c_str(), &st) != 0)
        return make_error("Failed to stat " + file.string() + ": " + errno_message(errno));
    const std::string link = "/sys/dev/block/" + std::to_string(major(st.st_dev)) + ":" +
                             std::to_string(minor(st.st_dev));
    auto target = root.read_link(link);
    if (!target)
        return make_error(file.string() + " is not on a block device (" + target.error().message +
                          ")");
    std::filesystem::path path(*target);
    if (root.exists(link + "/partition"))
        path = path.parent_path();
    return path.filename().string();
}

} // namespace

MachineIdentity read_machine_identity(const SysRoot& root, const Topology& topology) {
    MachineIdentity id;
    if (auto cpuinfo = root.read("/proc/cpuinfo"))
        id.cpu_model = cpu_model_of(*cpuinfo);
    if (auto release = root.read("/proc/sys/kernel/osrelease"))
        id.kernel = std::string(trim(*release));
    id.cpuidle_driver = topology.cpuidle_driver;
    id.cpuidle_governor = topology.cpuidle_governor;
    return id;
}

Result<Calibration> run_calibration(const SysRoot& root, const CalibrateOptions& options,
                                    const std::atomic<bool>& stop) {
    // latgovd writes the same per-CPU slots: the two must not run together.
    std::optional<RuntimeDir> ours;
    const RuntimeDir* runtime = options.locked_runtime_dir;
    if (!runtime) {
        auto dir = RuntimeDir::open(options.runtime_dir, true);
        if (!dir)
            return dir.error();
        if (auto guarded = dir->guard_cpus(root); !guarded)
            return guarded.error();
        if (auto locked = dir->lock(); !locked)
            return make_error(locked.error().message + ": stop latgovd first");
        runtime = &ours.emplace(std::move(*dir));
    }
    auto journal = journal_in(*runtime);
    if (!journal)
        return journal.error();
    auto topology = discover_topology(root);
    if (!topology)
        return topology.error();
    std::string disk_name = options.device;
    if (!options.file.empty()) {
        auto disk = disk_of_file(root, options.file);
        if (!disk)
            return disk.error();
        if (!disk_name.empty() && disk_name != *disk)
            return make_error(options.file.string() + " is on " + *disk + ", not " + disk_name);
        disk_name = *disk;
    }
    Governor governor(*topology, options.config, declared_costs(*topology));
    const GovernedDevice* device = nullptr;
    for (const auto& d : governor.devices())
        if (!device && (disk_name.empty() || d.name == disk_name))
            device = &d;
    if (!device)
        return make_error(disk_name.empty()
                              ? "no governed disk with per-queue IRQs to probe"
                              : "Device " + disk_name +
                                    " is not governed or has no queue with an IRQ to probe "
                                    "(`latgov explain " +
                                    disk_name + "` says why)");
    // The queue and CPUs: the one completing on the chosen CPU, submitted to
    // from another CPU when possible, so the completion CPU idles between IOs.
    const GovernedQueue* queue = nullptr;
    for (const auto& q : device->queues)
        if (!queue && !q.cpus.empty() && (!options.cpu || q.cpus.front() == *options.cpu))
            queue = &q;
    if (!queue)
        return make_error("no queue of " + device->name + " completes on cpu " +
                          std::to_string(options.cpu.value_or(-1)));
    Calibration c;
    c.device = device->name;
    c.cpu = queue->cpus.front();
    c.submit_cpu = queue->submit_cpus.empty() ? c.cpu : queue->submit_cpus.front();
    for (int cpu : queue->submit_cpus)
        if (cpu != c.cpu) {
            c.submit_cpu = cpu;
            break;
        }
    c.rounds = options.rounds;
    c.ios_per_level = options.ios_per_level;
    c.machine = read_machine_identity(root, *topology);
    const Cpu* cpu = topology->cpu(c.cpu);
    if (!cpu)
        return make_error("cpu " + std::to_string(c.cpu) + " is not online");
    if (cpu->resume_latency)
        return make_error("cpu " + std::to_string(c.cpu) + " already holds a limit (" +
                          format_resume_latency(cpu->resume_latency) +
                          "): someone else governs it");
    c.levels = calibration_levels(
        *cpu, idle_governor_kind(topology->cpuidle_driver, topology->cpuidle_governor));
    for (const auto& s : cpu->idle_states)
        if (!s.disabled)
            c.states.push_back({s.name, s.exit_latency_us, 0});

    const std::string device_node = "/dev/" + c.device;
    const auto path = options.file.empty() ? root.resolve(device_node) : options.file;
    constexpr int flags = O_RDONLY | O_DIRECT | O_CLOEXEC;
    Fd fd;
    if (!options.file.empty())
        fd = Fd(::open(path.c_str(), flags));
    else if (auto opened = root.open(device_node, flags))
        fd = std::move(*opened);
    if (!fd)
        return make_error(
            "Failed to open " + path.string() + ": " + errno_message(errno) +
            (options.file.empty() ? " (--file reads a file on the disk instead)" : ""));
    std::uint64_t size = 0;
    struct stat st {};
    if (::fstat(fd.get(), &st) != 0)
        return make_error("Failed to stat " + path.string() + ": " + errno_message(errno));
    if (S_ISBLK(st.st_mode))
        ::ioctl(fd.get(), BLKGETSIZE64, &size);
    else
        size = static_cast<std::uint64_t>(st.st_size);
    if (size < (1u << 20))
        return make_error(path.string() + " is smaller than 1 MiB, too small to probe");
    // The reads come from the submitting CPU so that the completion CPU idles
    // between them. A thread of their own is pinned there: the caller (latgovd
    // before its loop) keeps the CPUs it had.
    std::string log_lines;
    bool put_back = true;
    auto outcome = run_on_cpu(c.submit_cpu, [&]() -> Result<void> {
        Ring ring(4);
        if (!ring.ok())
            return make_error("Failed to set up io_uring");
        constexpr unsigned block = 4096;
        void* buffer = nullptr;
        if (::posix_memalign(&buffer, block, block) != 0)
            return make_error("out of memory");
        std::unique_ptr<void, decltype(&std::free)> owned(buffer, std::free);
        std::mt19937_64 rng(42);
        std::uniform_int_distribution<std::uint64_t> pick(0, size / block - 1);

        PerCpuHolder holder(root, *journal,
                            [&](const std::string& line) { log_lines += line + "\n"; });
        // Released however the probe ends: an exception (out of memory)
        // would otherwise leave the CPU at a level until the next restore,
        // and latgovd, whose own holder never wrote it, would say at its
        // exit that every constraint was released.
        struct ReleasedOnThrow {
            PerCpuHolder& holder;
            int unwinding = std::uncaught_exceptions();
            ~ReleasedOnThrow() {
                if (std::uncaught_exceptions() > unwinding)
                    try {
                        (void)holder.release_all();
                    } catch (...) { // the exception under way is the one to report
                    }
            }
        } released_on_throw{holder};
        const auto deadline = std::chrono::steady_clock::now() + options.max_time;
        Result<void> probed;
        for (int i = 0; i < 100 && probed.ok(); ++i) // warm-up
            if (auto r = ring.read(fd.get(), buffer, block, pick(rng) * block); !r)
                probed = r.error();
        for (int round = 0; round < c.rounds && probed.ok(); ++round) {
            for (size_t k = 0; k < c.levels.size() && probed.ok(); ++k) {
                // Rotate the order each round so drift hits every level alike.
                auto& level = c.levels[(k + static_cast<size_t>(round)) % c.levels.size()];
                std::map<int, LatencyLimit> wanted;
                if (level.limit)
                    wanted[c.cpu] = level.limit;
                holder.apply(wanted, std::chrono::steady_clock::now());
                // A level is measured only with its limit in force: a hold
                // that failed (a journal that cannot be taken over or
                // written, a file that cannot be) would measure the CPU
                // unconstrained under the level's name.
                if (level.limit) {
                    auto current = ResumeLatencyFile(root, c.cpu).read();
                    if (!current || !at_least_as_strict(*current, level.limit)) {
                        probed = make_error(
                            "cpu " + std::to_string(c.cpu) + " could not be held at " +
                            format_resume_latency(level.limit) + " for the " + level.name +
                            " level (it reads " +
                            (current ? format_resume_latency(*current) : current.error().message) +
                            ")");
                        break;
                    }
                }
                std::vector<double> samples;
                for (int i = 0; i < c.ios_per_level; ++i) {
                    if (stop.load()) {
                        probed = make_error("interrupted");
                        break;
                    }
                    if (std::chrono::steady_clock::now() > deadline) {
                        probed = make_error("time bound reached");
                        break;
                    }
                    auto latency = ring.read(fd.get(), buffer, block, pick(rng) * block);
                    if (!latency) {
                        probed = latency.error();
                        break;
                    }
                    samples.push_back(*latency);
                }
                std::vector<double> sorted = samples;
                std::sort(sorted.begin(), sorted.end());
                if (!sorted.empty())
                    level.round_medians_us.push_back(sorted[sorted.size() / 2]);
                level.samples_us.insert(level.samples_us.end(), samples.begin(), samples.end());
            }
        }
        put_back = holder.release_all();
        return probed;
    });
    const std::string log_tail = log_lines.empty() ? "" : ":\n" + log_lines;
    if (!put_back)
        return make_error(
            (outcome ? std::string("Calibration measured, but ")
                     : "Calibration stopped (" + outcome.error().message + "), and ") +
            "not every value could be put back; `latgovd --restore --runtime-dir " +
            runtime->path().string() + "` puts back what its journal records" + log_tail);
    if (!outcome)
        return make_error("Calibration stopped (" + outcome.error().message +
                          "); every value was put back" + log_tail);
    std::time_t t = std::time(nullptr);
    char date[32];
    std::strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&t));
    c.date = date;
    summarize(c);
    return c;
}

} // namespace latgov
