// The calibration probe on a tree written by the test: a virtio disk whose
// device node is a plain file, read for real (O_DIRECT, io_uring), and
// per-CPU PM QoS slots that are plain files. What it must leave as it found
// it: the values, and the CPU affinity of the thread that called it (latgovd
// runs it before its loop: a pinned daemon would stay on one CPU for life).
#include "allowed_cpus.hpp"
#include "latgov/calibration_probe.hpp"
#include "latgov/pinned_thread.hpp"
#include "scratch.hpp"

#include <doctest/doctest.h>
#include <fcntl.h>
#include <filesystem>
#include <fstream>
#include <sched.h>
#include <sstream>
#include <stdexcept>
#include <unistd.h>
#include <vector>

using namespace latgov;
namespace fs = std::filesystem;

namespace {

std::string cpu_list(const std::vector<int>& cpus) {
    std::string text;
    for (int cpu : cpus)
        text += (text.empty() ? "" : ",") + std::to_string(cpu);
    return text;
}

// One virtio disk vda whose single queue takes requests from every CPU this
// test may run on and completes on the last of them; /dev/vda is a 2 MiB
// file in the tree. The tree lives in the build directory, not /tmp, which
// may be a tmpfs without O_DIRECT.
std::string trimmed(std::string text) {
    while (!text.empty() && text.back() == '\n')
        text.pop_back();
    return text;
}

class ProbeTree {
  public:
    explicit ProbeTree(const std::vector<int>& cpus) {
        std::string pattern = LATGOV_TEST_SCRATCH_DIR "/latgov-probe.XXXXXX";
        root_ = ::mkdtemp(pattern.data());
        write("sys/devices/system/cpu/online", cpu_list(cpus) + "\n");
        for (int cpu : cpus) {
            std::string dir = "sys/devices/system/cpu/cpu" + std::to_string(cpu);
            write(dir + "/power/pm_qos_resume_latency_us", "0\n");
            state(dir + "/cpuidle/state0", "POLL", "0");
            state(dir + "/cpuidle/state1", "C1", "2");
        }
        const std::string vda = "sys/devices/pci0000:00/0000:00:02.0/virtio1/block/vda";
        write(vda + "/dev", "254:0\n");
        write(vda + "/mq/0/cpu_list", cpu_list(cpus) + "\n");
        link(vda + "/device", "../../../virtio1");
        link("sys/block/vda", "../devices/pci0000:00/0000:00:02.0/virtio1/block/vda");
        const std::string irq = "36";
        write("sys/kernel/irq/" + irq + "/actions", "virtio1-req.0\n");
        write("proc/irq/" + irq + "/smp_affinity_list", cpu_list(cpus) + "\n");
        write("proc/irq/" + irq + "/effective_affinity_list", std::to_string(cpus.back()) + "\n");
        write("dev/vda", std::string(2u << 20, 'x'));
    }
    ~ProbeTree() { fs::remove_all(root_); }
    ProbeTree(const ProbeTree&) = delete;
    ProbeTree& operator=(const ProbeTree&) = delete;

    void write(const std::string& rel, const std::string& text) const {
        fs::create_directories((root_ / rel).parent_path());
        std::ofstream(root_ / rel, std::ios::trunc) << text;
    }
    std::string read(const std::string& rel) const {
        std::ifstream in(root_ / rel);
        std::stringstream text;
        text << in.rdbuf();
        return text.str();
    }
    // The value as a number: latgov writes it back without the newline.
    std::string slot(int cpu) const {
        return trimmed(read("sys/devices/system/cpu/cpu" + std::to_string(cpu) +
                            "/power/pm_qos_resume_latency_us"));
    }
    const fs::path& root() const { return root_; }
    // The probe's runtime directory, which it opens, checks and locks: in
    // /tmp, whose sticky bit passes the check of the directories above it
    // (the build tree's owner and mode are whatever they are).
    fs::path runtime_dir() const { return run_.path() / "latgov"; }

  private:
    void link(const std::string& rel, const std::string& target) const {
        fs::create_directories((root_ / rel).parent_path());
        fs::create_directory_symlink(target, root_ / rel);
    }
    void state(const std::string& dir, const char* name, const char* latency) const {
        write(dir + "/name", std::string(name) + "\n");
        write(dir + "/latency", std::string(latency) + "\n");
        write(dir + "/residency", std::string(latency) + "\n");
        write(dir + "/disable", "0\n");
    }

    fs::path root_;
    test::TempDir run_{"latgov-probe-run"};
};

CalibrateOptions short_probe(const ProbeTree& tree) {
    CalibrateOptions options;
    options.rounds = 2;
    options.ios_per_level = 20;
    options.runtime_dir = tree.runtime_dir(); // opened and locked by the probe
    return options;
}

} // namespace

TEST_CASE("the probe reads from the submitting CPU, and the caller's affinity stays (two CPUs)") {
    const auto before = allowed_cpus();
    // With one CPU there is nothing to pin away from: this test proves
    // nothing there, so it fails rather than pass for nothing.
    REQUIRE_MESSAGE(before.size() >= 2, "needs 2 CPUs to run on, has " << cpu_list(before));
    ProbeTree tree(before);
    std::atomic<bool> stop{false};

    auto calibration = run_calibration(SysRoot(tree.root()), short_probe(tree), stop);

    REQUIRE_MESSAGE(calibration, calibration.error().message);
    CHECK(calibration->device == "vda");
    CHECK(calibration->cpu == before.back());
    CHECK(calibration->submit_cpu == before.front()); // the probe's reads ran there
    CHECK(allowed_cpus() == before);
    for (int cpu : before)
        CHECK(tree.slot(cpu) == "0");
    REQUIRE(calibration->levels.size() >= 2); // at least polling and the shallowest state
    for (const auto& level : calibration->levels)
        CHECK(level.samples_us.size() == 40);
}

TEST_CASE("a probe that stops early leaves the caller's affinity as it was (two CPUs)") {
    const auto before = allowed_cpus();
    REQUIRE_MESSAGE(before.size() >= 2, "needs 2 CPUs to run on, has " << cpu_list(before));
    ProbeTree tree(before);
    std::atomic<bool> stop{true}; // as after Ctrl-C

    auto calibration = run_calibration(SysRoot(tree.root()), short_probe(tree), stop);

    REQUIRE_FALSE(calibration);
    CHECK(calibration.error().message.find("interrupted") != std::string::npos);
    CHECK(allowed_cpus() == before);
    CHECK(tree.slot(before.back()) == "0");
}

TEST_CASE("a device node smaller than 1 MiB is refused before any read (two CPUs)") {
    const auto before = allowed_cpus();
    REQUIRE_MESSAGE(before.size() >= 2, "needs 2 CPUs to run on, has " << cpu_list(before));
    ProbeTree tree(before);
    tree.write("dev/vda", std::string(4096, 'x'));
    std::atomic<bool> stop{false};

    auto calibration = run_calibration(SysRoot(tree.root()), short_probe(tree), stop);

    REQUIRE_FALSE(calibration);
    CHECK(calibration.error().message.find("smaller than 1 MiB") != std::string::npos);
    CHECK(allowed_cpus() == before);
}

TEST_CASE("work run on a CPU sees only that CPU, the caller keeps its own (two CPUs)") {
    const auto before = allowed_cpus();
    REQUIRE_MESSAGE(before.size() >= 2, "needs 2 CPUs to run on, has " << cpu_list(before));
    std::vector<int> inside;

    auto ran = run_on_cpu(before.back(), [&]() -> Result<void> {
        inside = allowed_cpus();
        return make_error("the work's own error");
    });

    CHECK(inside == std::vector<int>{before.back()});
    REQUIRE_FALSE(ran);
    CHECK(ran.error().message == "the work's own error");
    CHECK(allowed_cpus() == before);
}

TEST_CASE("a CPU the caller may not use is an error, and the work does not run") {
    const auto before = allowed_cpus();
    const int absent = CPU_SETSIZE - 1; // no test machine has 1024 CPUs
    bool ran_work = false;

    auto ran = run_on_cpu(absent, [&]() -> Result<void> {
        ran_work = true;
        return {};
    });

    REQUIRE_FALSE(ran);
    CHECK(ran.error().message.find("Failed to pin a thread to cpu " + std::to_string(absent)) == 0);
    CHECK_FALSE(ran_work);
    CHECK(allowed_cpus() == before);
}

TEST_CASE("an exception thrown by the work reaches the caller after the join") {
    const auto before = allowed_cpus();
    CHECK_THROWS_WITH(
        static_cast<void>(
            run_on_cpu(before.front(), []() -> Result<void> { throw std::runtime_error("boom"); })),
        "boom");
    CHECK(allowed_cpus() == before);
}
