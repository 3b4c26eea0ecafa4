// Discovery on small trees written by the test; whole-machine trees captured
// with `latgov snapshot` are checked by the golden tests.
#include "latgov/discovery.hpp"
#include "latgov/topology_json.hpp"

#include <doctest/doctest.h>
#include <filesystem>
#include <fstream>
#include <unistd.h>

using namespace latgov;
namespace fs = std::filesystem;

namespace {

// A throw-away sysfs-like tree: one virtio disk with one queue on two CPUs.
class FakeTree {
  public:
    FakeTree() {
        char pattern[] = "/tmp/latgov-tree.XXXXXX";
        root_ = ::mkdtemp(pattern);
        write("sys/devices/system/cpu/online", "0-1\n");
        for (int cpu = 0; cpu < 2; ++cpu) {
            std::string dir = "sys/devices/system/cpu/cpu" + std::to_string(cpu);
            write(dir + "/power/pm_qos_resume_latency_us", "0\n");
            state(dir + "/cpuidle/state0", "POLL", "0", "0");
            state(dir + "/cpuidle/state1", "C1", "2", "2");
        }
        write("sys/devices/system/cpu/power/pm_qos_resume_latency_us", "0\n");
        write("sys/devices/pci0000:00/0000:00:02.0/virtio1/block/vda/dev", "254:0\n");
        write("sys/devices/pci0000:00/0000:00:02.0/virtio1/block/vda/mq/0/cpu_list", "0, 1\n");
        link("sys/devices/pci0000:00/0000:00:02.0/virtio1/block/vda/device", "../../../virtio1");
        link("sys/block/vda", "../devices/pci0000:00/0000:00:02.0/virtio1/block/vda");
        irq(36, "virtio1-req.0", "0-1", "1");
        irq(35, "virtio1-config", "0-1", "0");
    }
    ~FakeTree() { fs::remove_all(root_); }

    void write(const std::string& rel, const std::string& text) {
        fs::create_directories((root_ / rel).parent_path());
        std::ofstream(root_ / rel) << text;
    }
    void link(const std::string& rel, const std::string& target) {
        fs::create_directories((root_ / rel).parent_path());
        fs::create_directory_symlink(target, root_ / rel);
    }
    void state(const std::string& dir, const char* name, const char* latency,
               const char* residency) {
        write(dir + "/name", std::string(name) + "\n");
        write(dir + "/latency", std::string(latency) + "\n");
        write(dir + "/residency", std::string(residency) + "\n");
        write(dir + "/disable", "0\n");
    }
    void irq(int n, const std::string& name, const std::string& affinity,
             const std::string& effective) {
        write("sys/kernel/irq/" + std::to_string(n) + "/actions", name + "\n");
        write("proc/irq/" + std::to_string(n) + "/smp_affinity_list", affinity + "\n");
        write("proc/irq/" + std::to_string(n) + "/effective_affinity_list", effective + "\n");
    }
    // What a kernel without CONFIG_GENERIC_IRQ_EFFECTIVE_AFF_MASK shows.
    void no_effective_affinity() {
        for (const auto& entry : fs::directory_iterator(root_ / "proc/irq"))
            fs::remove(entry.path() / "effective_affinity_list");
    }
    // A disk of a driver with no naming rule, whose queues are found among
    // its PCI function's MSI vectors by affinity mask.
    void unknown_driver_disk() {
        write("sys/devices/pci0000:00/0000:00:07.0/msi_irqs/50", "msix\n");
        write("sys/devices/pci0000:00/0000:00:07.0/msi_irqs/51", "msix\n");
        write("sys/devices/pci0000:00/0000:00:07.0/host0/block/sda/dev", "8:0\n");
        write("sys/devices/pci0000:00/0000:00:07.0/host0/block/sda/mq/0/cpu_list", "0\n");
        write("sys/devices/pci0000:00/0000:00:07.0/host0/block/sda/mq/1/cpu_list", "1\n");
        link("sys/devices/pci0000:00/0000:00:07.0/host0/block/sda/device", "../..");
        link("sys/block/sda", "../devices/pci0000:00/0000:00:07.0/host0/block/sda");
        irq(50, "xyz-q0", "0", "0");
        irq(51, "xyz-q1", "1", "1");
    }
    const fs::path& root() const { return root_; }

  private:
    fs::path root_;
};

} // namespace

TEST_CASE("a virtio-blk queue completes on its IRQ's effective CPU") {
    FakeTree tree;
    auto topo = discover_topology(SysRoot(tree.root()));
    REQUIRE(topo);
    REQUIRE(topo->devices.size() == 1);
    const auto& vda = topo->devices[0];
    CHECK(vda.kind == DeviceKind::virtio_blk);
    REQUIRE(vda.queues.size() == 1);
    CHECK(vda.queues[0].irq == 36);
    CHECK(vda.queues[0].irq_name == "virtio1-req.0");
    CHECK(vda.queues[0].completion_cpus == CpuSet{1});
    CHECK(vda.queues[0].submit_cpus == CpuSet{0, 1});
    CHECK(vda.queues[0].completion_source == CompletionSource::irq_effective_affinity);
    REQUIRE(topo->cpus.size() == 2);
    CHECK(topo->cpus[1].idle_states.size() == 2);
    CHECK(topo->cpus[1].idle_states[1].exit_latency_us == 2);
    CHECK(topo->warnings.empty());
}

TEST_CASE("a malformed queue file skips the device with a warning naming the file") {
    FakeTree tree;
    tree.write("sys/devices/pci0000:00/0000:00:02.0/virtio1/block/vda/mq/0/cpu_list", "0,x\n");
    auto topo = discover_topology(SysRoot(tree.root()));
    REQUIRE(topo);
    CHECK(topo->devices.empty());
    REQUIRE(topo->warnings.size() == 1);
    CHECK(topo->warnings[0].find("mq/0/cpu_list") != std::string::npos);
    CHECK(topo->warnings[0].find("skipping device vda") != std::string::npos);
}

TEST_CASE("a device that vanished mid-scan is skipped, not fatal") {
    FakeTree tree;
    // The link is still listed but points nowhere: the device went away.
    fs::remove_all(tree.root() / "sys/devices/pci0000:00/0000:00:02.0/virtio1/block/vda");
    auto topo = discover_topology(SysRoot(tree.root()));
    REQUIRE(topo);
    CHECK(topo->devices.empty());
    REQUIRE(topo->warnings.size() == 1);
    CHECK(topo->warnings[0].find("vda") != std::string::npos);
}

TEST_CASE("without an online CPU list discovery fails and says which file") {
    FakeTree tree;
    fs::remove(tree.root() / "sys/devices/system/cpu/online");
    auto topo = discover_topology(SysRoot(tree.root()));
    REQUIRE_FALSE(topo);
    CHECK(topo.error().message.find("sys/devices/system/cpu/online") != std::string::npos);
}

TEST_CASE("a queue whose IRQ is shut down falls back to its online affinity CPUs") {
    FakeTree tree;
    tree.irq(36, "virtio1-req.0", "1", "");
    auto topo = discover_topology(SysRoot(tree.root()));
    REQUIRE(topo);
    REQUIRE(topo->devices.size() == 1);
    CHECK(topo->devices[0].queues[0].completion_cpus == CpuSet{1});
}

TEST_CASE("a disk with no naming rule is matched to the device IRQ with its mask") {
    FakeTree tree;
    tree.unknown_driver_disk();
    auto topo = discover_topology(SysRoot(tree.root()));
    REQUIRE(topo);
    const BlockDevice* sda = topo->device("sda");
    REQUIRE(sda);
    REQUIRE(sda->queues.size() == 2);
    CHECK(sda->queues[0].irq == 50);
    CHECK(sda->queues[1].irq == 51);
    CHECK(sda->queues[1].irq_name == "xyz-q1");
    CHECK(sda->queues[1].completion_cpus == CpuSet{1});
}

TEST_CASE("without effective_affinity_list a queue completes on its IRQ's online affinity CPUs") {
    FakeTree tree;
    tree.irq(36, "virtio1-req.0", "1-3", "1"); // CPUs 2 and 3 are offline
    tree.no_effective_affinity();
    auto topo = discover_topology(SysRoot(tree.root()));
    REQUIRE(topo);
    CHECK(topo->warnings.empty());
    REQUIRE(topo->devices.size() == 1);
    const auto& q = topo->devices[0].queues.at(0);
    CHECK(q.irq == 36);
    CHECK(q.irq_affinity == CpuSet{1, 2, 3});
    CHECK(q.completion_cpus == CpuSet{1});
    CHECK(q.completion_source == CompletionSource::irq_affinity);
    CHECK(format_topology_table(*topo).find(" 1 (affinity) ") != std::string::npos);
    CHECK(to_json(*topo)["devices"][0]["queues"][0]["completion_source"] == "irq_affinity");
}

TEST_CASE("without effective_affinity_list a disk is still matched to its IRQs by mask") {
    FakeTree tree;
    tree.unknown_driver_disk();
    tree.no_effective_affinity();
    auto topo = discover_topology(SysRoot(tree.root()));
    REQUIRE(topo);
    const BlockDevice* sda = topo->device("sda");
    REQUIRE(sda);
    REQUIRE(sda->queues.size() == 2);
    CHECK(sda->queues[1].irq == 51);
    CHECK(sda->queues[1].completion_cpus == CpuSet{1});
    CHECK(sda->queues[1].completion_source == CompletionSource::irq_affinity);
}

TEST_CASE("with neither effective_affinity_list nor smp_affinity_list the disk is skipped naming "
          "the file") {
    FakeTree tree;
    tree.no_effective_affinity();
    fs::remove(tree.root() / "proc/irq/36/smp_affinity_list");
    auto topo = discover_topology(SysRoot(tree.root()));
    REQUIRE(topo);
    CHECK(topo->devices.empty());
    REQUIRE(topo->warnings.size() == 1);
    CHECK(topo->warnings[0].find("proc/irq/36/smp_affinity_list: No such file or directory") !=
          std::string::npos);
    CHECK(topo->warnings[0].find("skipping device vda") != std::string::npos);
}

TEST_CASE("an effective_affinity_list that is there but unreadable skips the disk naming it") {
    FakeTree tree;
    // Only a missing file means the kernel keeps no effective affinity.
    fs::remove(tree.root() / "proc/irq/36/effective_affinity_list");
    fs::create_directory(tree.root() / "proc/irq/36/effective_affinity_list");
    auto topo = discover_topology(SysRoot(tree.root()));
    REQUIRE(topo);
    CHECK(topo->devices.empty());
    REQUIRE(topo->warnings.size() == 1);
    CHECK(topo->warnings[0].find("proc/irq/36/effective_affinity_list") != std::string::npos);
    CHECK(topo->warnings[0].find("skipping device vda") != std::string::npos);
}

TEST_CASE("a capture keeps symlinks and the files read") {
    FakeTree tree;
    SysRoot root(tree.root());
    root.start_capture();
    REQUIRE(discover_topology(root));
    const auto& entries = root.capture()->entries();
    REQUIRE(entries.count("/sys/block/vda"));
    CHECK(entries.at("/sys/block/vda").kind == CapturedEntry::Kind::symlink);
    const std::string cpu_list =
        "/sys/devices/pci0000:00/0000:00:02.0/virtio1/block/vda/mq/0/cpu_list";
    REQUIRE(entries.count(cpu_list));
    CHECK(entries.at(cpu_list).content == "0, 1\n");
    CHECK(entries.count("/proc/irq/35/smp_affinity_list") == 0); // never read
}
