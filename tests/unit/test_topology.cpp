// Discovery on small trees written by the test; whole-machine trees captured
// with `latgov snapshot` are checked by the golden tests.
#include "latgov/discovery.hpp"
#include "latgov/governor.hpp"
#include "latgov/json.hpp"
#include "latgov/sampler.hpp"
#include "latgov/topology_json.hpp"

#include <algorithm>
#include <cstdlib>
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
    // A PCIe (or `transport`) NVMe controller nvme0, live, with namespace
    // nvme0n1: two hardware queues, one per CPU. Over PCIe its IRQs are
    // nvme0q0 (admin) to nvme0q2; fabrics name none.
    void nvme(const std::string& transport = "pcie") {
        const std::string ctrl = "sys/devices/pci0000:00/0000:00:04.0/nvme/nvme0";
        write(ctrl + "/transport", transport + "\n");
        write(ctrl + "/state", "live\n");
        link("sys/class/nvme/nvme0", "../../devices/pci0000:00/0000:00:04.0/nvme/nvme0");
        write(ctrl + "/nvme0n1/dev", "259:0\n");
        write(ctrl + "/nvme0n1/mq/0/cpu_list", "0\n");
        write(ctrl + "/nvme0n1/mq/1/cpu_list", "1\n");
        link(ctrl + "/nvme0n1/device", "../../nvme0");
        link("sys/block/nvme0n1", "../devices/pci0000:00/0000:00:04.0/nvme/nvme0/nvme0n1");
        if (transport == "pcie") {
            irq(40, "nvme0q0", "0-1", "0");
            irq(41, "nvme0q1", "0", "0");
            irq(42, "nvme0q2", "1", "1");
        }
    }
    // What debugfs says of a queue's type.
    void hctx_type(const std::string& disk, int hctx, const std::string& type) {
        write("sys/kernel/debug/block/" + disk + "/hctx" + std::to_string(hctx) + "/type",
              type + "\n");
    }
    // A host without /sys/kernel/irq (no CONFIG_SPARSE_IRQ, or hidden).
    void no_irq_names() { fs::remove_all(root_ / "sys/kernel/irq"); }
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

TEST_CASE("a queue's cpu_list cut short at a page is completed from its cpu directories") {
    FakeTree tree;
    const std::string mq = "sys/devices/pci0000:00/0000:00:02.0/virtio1/block/vda/mq/0";
    // As the kernel prints it into one page: whole items while they fit.
    const auto page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
    std::string text;
    int cpus = 0;
    for (;; ++cpus) {
        const std::string item = (cpus ? ", " : "") + std::to_string(cpus);
        if (text.size() + item.size() >= page - 1)
            break;
        text += item;
    }
    const int mapped = cpus + 64; // more than the page could list
    tree.write(mq + "/cpu_list", text + "\n");
    for (int cpu = 0; cpu < mapped; ++cpu)
        fs::create_directories(tree.root() / mq / ("cpu" + std::to_string(cpu)));
    auto topo = discover_topology(SysRoot(tree.root()));
    REQUIRE(topo);
    REQUIRE(topo->devices.size() == 1);
    const auto& submit = topo->devices[0].queues.at(0).submit_cpus;
    CHECK(submit.size() == static_cast<std::size_t>(mapped));
    CHECK(submit.front() == 0);
    CHECK(submit.back() == mapped - 1);
    // A list that fits is taken as it is: the directories are not read.
    tree.write(mq + "/cpu_list", "0, 1\n");
    topo = discover_topology(SysRoot(tree.root()));
    REQUIRE(topo);
    CHECK(topo->devices[0].queues.at(0).submit_cpus == CpuSet{0, 1});
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

TEST_CASE("an IRQ moved after discovery is named, and only for a governed device") {
    // irqbalance or an administrator moves an unmanaged IRQ with no uevent.
    FakeTree tree;
    const SysRoot root(tree.root());
    auto topo = discover_topology(root);
    REQUIRE(topo);
    CHECK_FALSE(moved_irq(root, *topo, {"vda"}));

    tree.write("proc/irq/36/effective_affinity_list", "0\n");
    const auto moved = moved_irq(root, *topo, {"vda"});
    REQUIRE(moved);
    CHECK(*moved == "IRQ 36 (virtio1-req.0) of vda queue 0 completes on cpus 0 now, not 1");
    CHECK_FALSE(moved_irq(root, *topo, {"sda"})); // not a governed device
    // A new discovery agrees with the check: no move against it.
    auto again = discover_topology(root);
    REQUIRE(again);
    CHECK(again->devices[0].queues[0].completion_cpus == CpuSet{0});
    CHECK_FALSE(moved_irq(root, *again, {"vda"}));

    // Without an effective mask, the online CPUs of its affinity.
    tree.no_effective_affinity();
    tree.write("proc/irq/36/smp_affinity_list", "1\n");
    const auto narrowed = moved_irq(root, *again, {"vda"});
    REQUIRE(narrowed);
    CHECK(narrowed->find("completes on cpus 1 now, not 0") != std::string::npos);

    // An IRQ that cannot be read (freed with its device) is not a move.
    fs::remove_all(tree.root() / "proc/irq/36");
    CHECK_FALSE(moved_irq(root, *again, {"vda"}));
}

TEST_CASE(
    "the IRQ check needs the effective mask alone, and finds the move of an IRQ queues share") {
    // Two queues on virtio's one shared virtqueue vector.
    FakeTree tree;
    tree.write("sys/devices/pci0000:00/0000:00:02.0/virtio1/block/vda/mq/0/cpu_list", "0\n");
    tree.write("sys/devices/pci0000:00/0000:00:02.0/virtio1/block/vda/mq/1/cpu_list", "1\n");
    tree.irq(36, "virtio1-virtqueues", "0-1", "1");
    const SysRoot root(tree.root());
    auto topo = discover_topology(root);
    REQUIRE(topo);
    REQUIRE(topo->devices.size() == 1);
    REQUIRE(topo->devices[0].queues.size() == 2);
    CHECK(topo->devices[0].queues[1].irq == 36);
    CHECK_FALSE(moved_irq(root, *topo, {"vda"}));

    // smp_affinity_list is not needed where the effective mask names CPUs.
    fs::remove(tree.root() / "proc/irq/36/smp_affinity_list");
    CHECK_FALSE(moved_irq(root, *topo, {"vda"}));
    tree.write("proc/irq/36/effective_affinity_list", "0\n");
    const auto moved = moved_irq(root, *topo, {"vda"});
    REQUIRE(moved);
    CHECK(*moved == "IRQ 36 (virtio1-virtqueues) of vda queue 0 completes on cpus 0 now, not 1");

    // An empty effective mask (a shut-down IRQ) still needs the affinity.
    tree.write("proc/irq/36/effective_affinity_list", "\n");
    CHECK_FALSE(moved_irq(root, *topo, {"vda"}));
    tree.write("proc/irq/36/smp_affinity_list", "0\n");
    const auto shut = moved_irq(root, *topo, {"vda"});
    REQUIRE(shut);
    CHECK(shut->find("completes on cpus 0 now, not 1") != std::string::npos);
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

namespace {

const HardwareQueue& queue_of(const Topology& topo, std::string_view disk, size_t index) {
    const BlockDevice* device = topo.device(disk);
    REQUIRE(device);
    REQUIRE(device->queues.size() > index);
    return device->queues[index];
}

bool has_warning(const Topology& topo, std::string_view a, std::string_view b = "") {
    return std::any_of(topo.warnings.begin(), topo.warnings.end(), [&](const std::string& w) {
        return w.find(a) != std::string::npos && w.find(b) != std::string::npos;
    });
}

} // namespace

TEST_CASE("NVMe over a fabric has no queue IRQs: its queues complete on their submitters") {
    for (const char* transport : {"tcp", "rdma", "fc", "loop"}) {
        CAPTURE(transport);
        FakeTree tree;
        tree.nvme(transport);
        auto topo = discover_topology(SysRoot(tree.root()));
        REQUIRE(topo);
        for (size_t i = 0; i < 2; ++i) {
            const auto& q = queue_of(*topo, "nvme0n1", i);
            CHECK(q.type == QueueType::default_);
            CHECK_FALSE(q.irq);
            CHECK(q.completion_source == CompletionSource::submit_cpus);
            CHECK(q.completion_cpus == CpuSet{static_cast<int>(i)});
        }
        CHECK(topo->device("nvme0n1")->transport == transport);
    }
}

TEST_CASE("a virtio disk on one IRQ of its own completes there, not on a shared line") {
    FakeTree tree;
    // virtio-mmio, or virtio-pci on INTx: one IRQ named after the device.
    fs::remove_all(tree.root() / "sys/kernel/irq/35");
    tree.irq(36, "virtio1", "0-1", "1");
    auto topo = discover_topology(SysRoot(tree.root()));
    REQUIRE(topo);
    CHECK(topo->devices.at(0).queues.at(0).irq == 36);
    CHECK(topo->devices.at(0).queues.at(0).completion_cpus == CpuSet{1});
    // The line shared with another device, whose action also names
    // another IRQ: not the disk's.
    tree.irq(24, "PCIe PME,aerdrv", "0", "0");
    tree.irq(36, "virtio1,PCIe PME,aerdrv", "0-1", "1");
    topo = discover_topology(SysRoot(tree.root()));
    REQUIRE(topo);
    CHECK_FALSE(topo->devices.at(0).queues.at(0).irq);
    CHECK(topo->devices.at(0).queues.at(0).completion_source == CompletionSource::submit_cpus);
}

TEST_CASE("a queue without an IRQ completes on its online submitters only") {
    FakeTree tree;
    tree.nvme("tcp");
    // cpu 1 offline: blk-mq keeps it in the queue's list.
    tree.write("sys/devices/system/cpu/online", "0\n");
    auto topo = discover_topology(SysRoot(tree.root()));
    REQUIRE(topo);
    CHECK(queue_of(*topo, "nvme0n1", 0).completion_cpus == CpuSet{0});
    CHECK(queue_of(*topo, "nvme0n1", 1).submit_cpus == CpuSet{1});
    CHECK(queue_of(*topo, "nvme0n1", 1).completion_cpus.empty());
}

TEST_CASE("a PCIe NVMe queue debugfs calls default is not a poll queue for want of IRQ names") {
    FakeTree tree;
    tree.nvme();
    tree.hctx_type("nvme0n1", 0, "default");
    tree.hctx_type("nvme0n1", 1, "default");
    tree.no_irq_names();
    auto topo = discover_topology(SysRoot(tree.root()));
    REQUIRE(topo);
    for (size_t i = 0; i < 2; ++i) {
        const auto& q = queue_of(*topo, "nvme0n1", i);
        CHECK(q.type == QueueType::default_);
        CHECK(q.completion_source == CompletionSource::submit_cpus);
        CHECK(q.completion_cpus == CpuSet{static_cast<int>(i)});
    }
    CHECK(has_warning(*topo, "sys/kernel/irq", "no queue can be matched to its IRQ"));
}

TEST_CASE("without debugfs a PCIe NVMe queue without an IRQ among its controller's is a poll "
          "queue") {
    FakeTree tree;
    tree.nvme();
    fs::remove_all(tree.root() / "sys/kernel/irq/42"); // hctx1 is a poll queue: no vector
    auto topo = discover_topology(SysRoot(tree.root()));
    REQUIRE(topo);
    CHECK(queue_of(*topo, "nvme0n1", 0).irq == 41);
    CHECK(queue_of(*topo, "nvme0n1", 1).type == QueueType::poll);
    CHECK(queue_of(*topo, "nvme0n1", 1).completion_source == CompletionSource::none);
    // Without any of the controller's IRQ names nothing is guessed.
    tree.no_irq_names();
    topo = discover_topology(SysRoot(tree.root()));
    REQUIRE(topo);
    CHECK(queue_of(*topo, "nvme0n1", 1).type == QueueType::default_);
    CHECK(queue_of(*topo, "nvme0n1", 1).completion_source == CompletionSource::submit_cpus);
}

TEST_CASE("a PCIe NVMe queue of type default without its IRQ completes on its submitters, "
          "with a warning") {
    FakeTree tree;
    tree.nvme();
    tree.hctx_type("nvme0n1", 1, "default");
    fs::remove_all(tree.root() / "sys/kernel/irq/42");
    auto topo = discover_topology(SysRoot(tree.root()));
    REQUIRE(topo);
    CHECK(queue_of(*topo, "nvme0n1", 1).type == QueueType::default_);
    CHECK(queue_of(*topo, "nvme0n1", 1).completion_cpus == CpuSet{1});
    CHECK(has_warning(*topo, "nvme0n1: hardware queue 1 (default) has no IRQ nvme0q2"));
}

TEST_CASE("an NVMe disk whose device link cannot be read is skipped naming the link") {
    FakeTree tree;
    tree.nvme();
    fs::remove(tree.root() / "sys/devices/pci0000:00/0000:00:04.0/nvme/nvme0/nvme0n1/device");
    auto topo = discover_topology(SysRoot(tree.root()));
    REQUIRE(topo);
    CHECK_FALSE(topo->device("nvme0n1"));
    CHECK(has_warning(*topo, "nvme0n1/device", "skipping device nvme0n1"));
}

TEST_CASE("the disks of an NVMe controller that is not live are skipped with a warning") {
    FakeTree tree;
    tree.nvme();
    // A reset frees the I/O queues' IRQs; the admin queue's stays.
    fs::remove_all(tree.root() / "sys/kernel/irq/41");
    fs::remove_all(tree.root() / "sys/kernel/irq/42");
    tree.write("sys/devices/pci0000:00/0000:00:04.0/nvme/nvme0/state", "resetting\n");
    auto topo = discover_topology(SysRoot(tree.root()));
    REQUIRE(topo);
    CHECK_FALSE(topo->device("nvme0n1"));
    CHECK(has_warning(*topo, "controller nvme0 is resetting", "skipping device nvme0n1"));
}

TEST_CASE("an unparsable idle state makes the CPU's whole idle table unknown") {
    FakeTree tree;
    tree.write("sys/devices/system/cpu/cpuidle/current_driver", "intel_idle\n");
    tree.write("sys/devices/system/cpu/cpu1/cpuidle/state1/latency", "lots\n");
    auto topo = discover_topology(SysRoot(tree.root()));
    REQUIRE(topo);
    REQUIRE(topo->cpus.size() == 2);
    CHECK(topo->cpus[0].idle_states_known);
    CHECK(topo->cpus[0].idle_states.size() == 2);
    CHECK_FALSE(topo->cpus[1].idle_states_known);
    CHECK(topo->cpus[1].idle_states.empty()); // not POLL alone, as if C1 were not there
    CHECK(has_warning(*topo, "cpu1/cpuidle/state1/latency", "idle states of cpu1 are unknown"));
    // A latency beyond 32 bits is not one the kernel wrote: unknown too,
    // not cut to its low bits (4294967297 would read as 1 us).
    tree.write("sys/devices/system/cpu/cpu1/cpuidle/state1/latency", "4294967297\n");
    topo = discover_topology(SysRoot(tree.root()));
    REQUIRE(topo);
    CHECK_FALSE(topo->cpus[1].idle_states_known);
    CHECK(has_warning(*topo, "cpu1/cpuidle/state1/latency", "\"4294967297\""));
}

TEST_CASE(
    "a cpuidle directory that cannot be listed under an active driver is unknown, not empty") {
    FakeTree tree;
    tree.write("sys/devices/system/cpu/cpuidle/current_driver", "acpi_idle\n");
    fs::remove_all(tree.root() / "sys/devices/system/cpu/cpu0/cpuidle");
    auto topo = discover_topology(SysRoot(tree.root()));
    REQUIRE(topo);
    CHECK_FALSE(topo->cpus[0].idle_states_known);
    CHECK(has_warning(*topo, "cpu0/cpuidle", "idle states of cpu0 are unknown"));
    // No driver: no table to read, and nothing unknown about it.
    fs::remove(tree.root() / "sys/devices/system/cpu/cpuidle/current_driver");
    topo = discover_topology(SysRoot(tree.root()));
    REQUIRE(topo);
    CHECK(topo->cpus[0].idle_states_known);
    CHECK(topo->warnings.empty());
}

TEST_CASE("a SCSI disk finds its HBA's MSI IRQs four levels up, in numeric order") {
    FakeTree tree;
    const std::string hba = "sys/devices/pci0000:00/0000:00:1f.2";
    const std::string lun = hba + "/ata1/host0/target0:0:0/0:0:0:0";
    tree.write(hba + "/msi_irqs/99", "msi\n");
    tree.write(hba + "/msi_irqs/100", "msi\n");
    tree.write(hba + "/msi_irqs/101", "msi\n");
    tree.write(lun + "/block/sdb/dev", "8:16\n");
    tree.write(lun + "/block/sdb/mq/0/cpu_list", "0\n");
    tree.write(lun + "/block/sdb/mq/1/cpu_list", "1\n");
    tree.link(lun + "/block/sdb/device", "../..");
    tree.link("sys/block/sdb", "../devices/pci0000:00/0000:00:1f.2/ata1/host0/target0:0:0/"
                               "0:0:0:0/block/sdb");
    tree.irq(99, "ahci-a", "0", "0");
    tree.irq(100, "ahci-b", "0", "0");
    tree.irq(101, "ahci-c", "1", "1");
    auto topo = discover_topology(SysRoot(tree.root()));
    REQUIRE(topo);
    // Queue 1: one IRQ with its mask. Queue 0: two, so neither.
    CHECK(queue_of(*topo, "sdb", 1).irq == 101);
    CHECK_FALSE(queue_of(*topo, "sdb", 0).irq);
    CHECK(has_warning(*topo, "sdb: hardware queue 0: MSI IRQs 99 (ahci-a), 100 (ahci-b)"));
}

namespace {

// The golden multipath VM's tree (nvme0n1 over paths nvme0c0n1 and
// nvme0c1n1, and nullb0), unpacked in a scratch directory to be changed.
class MultipathTree {
  public:
    MultipathTree() {
        char pattern[] = "/tmp/latgov-mp.XXXXXX";
        root_ = ::mkdtemp(pattern);
        const auto tarball = fs::path(LATGOV_SOURCE_DIR) / "tests/golden/vm-multipath.tar.gz";
        const std::string command =
            "tar -xzf '" + tarball.string() + "' -C '" + root_.string() + "'";
        REQUIRE(std::system(command.c_str()) == 0);
    }
    ~MultipathTree() { fs::remove_all(root_); }
    const fs::path& root() const { return root_; }
    // The files the sampler reads, which a capture does not keep.
    void stat_files() const {
        std::ofstream(root_ / "proc/stat") << "cpu  1 2 3 4 5 6 7 0 0 0\ncpu0 1 2 3 4 5 6 7 0 0 0\n"
                                              "intr 10 1 2 3\n";
        for (const auto& disk : {"nullb0", "nvme0n1"})
            if (fs::exists(root_ / "sys/block" / disk))
                std::ofstream(root_ / "sys/block" / disk / "stat")
                    << "1 0 8 0 0 0 0 0 0 5 5 0 0 0 0 0 0\n";
    }

  private:
    fs::path root_;
};

} // namespace

TEST_CASE("multipath paths whose head is not there yet are left out with a warning") {
    MultipathTree tree;
    {
        auto topo = discover_topology(SysRoot(tree.root()));
        REQUIRE(topo);
        CHECK(topo->device("nvme0c0n1"));
        CHECK(topo->device("nvme0n1")->paths == std::vector<std::string>{"nvme0c0n1", "nvme0c1n1"});
    }
    fs::remove(tree.root() / "sys/block/nvme0n1"); // no path ANA-usable yet
    auto topo = discover_topology(SysRoot(tree.root()));
    REQUIRE(topo);
    CHECK_FALSE(topo->device("nvme0c0n1"));
    CHECK_FALSE(topo->device("nvme0c1n1"));
    CHECK(topo->device("nullb0"));
    CHECK(has_warning(*topo, "multipath head /sys/block/nvme0n1 is missing",
                      "skipping device nvme0c0n1"));
    CHECK(has_warning(*topo, "multipath head /sys/block/nvme0n1 is missing",
                      "skipping device nvme0c1n1"));
    // What latgovd opens of it: nothing (the paths went with their head,
    // and nullb0, with no IRQ of its own, is governed only by a rule).
    tree.stat_files();
    const Governor governor(*topo, default_config(), declared_costs(*topo));
    CHECK(governor.stat_sources().empty());
    auto sampler = IoSampler::open(SysRoot(tree.root()), governor.stat_sources());
    REQUIRE(sampler);
    CHECK(sampler->warnings().empty());
}

TEST_CASE("an onset's baseline reads one device's stat and single IRQs' per-CPU counts") {
    MultipathTree tree;
    tree.stat_files();
    const SysRoot root(tree.root());
    auto sampler = IoSampler::open(root, {"nvme0n1", "nullb0"});
    REQUIRE(sampler);
    std::ofstream(tree.root() / "sys/block/nullb0/stat") << "3 0 8 0 4 0 0 0 2 5 5 0 0 0 0 0 0\n";
    auto stat = sampler->read_device(1);
    REQUIRE(stat);
    CHECK(stat->read_ios == 3);
    CHECK(stat->write_ios == 4);
    CHECK(stat->in_flight == 2);
    CHECK_FALSE(sampler->read_device(2)); // no such slot
    fs::create_directories(tree.root() / "sys/kernel/irq/33");
    std::ofstream(tree.root() / "sys/kernel/irq/33/per_cpu_count") << "4,5\n";
    auto irqs = IrqCounts::open(root, {33, 34});
    REQUIRE(irqs.warnings().size() == 1); // 34 has no directory
    CHECK(irqs.warnings()[0].find("sys/kernel/irq/34/per_cpu_count") != std::string::npos);
    CHECK(irqs.read(33) == 9u);
    CHECK_FALSE(irqs.read(34));
    std::ofstream(tree.root() / "sys/kernel/irq/33/per_cpu_count") << "4,x\n";
    CHECK_FALSE(irqs.read(33)); // not a count: no baseline
}

TEST_CASE("a drive's model that is not UTF-8 is dumped with its bytes replaced, not thrown on") {
    Topology topo;
    NvmeController nvme0;
    nvme0.name = "nvme0";
    nvme0.model = "QEMU \xff\xfe Ctrl"; // firmware bytes
    topo.controllers.push_back(nvme0);
    std::string text;
    REQUIRE_NOTHROW(text = dump_text(to_json(topo), 2));
    CHECK(text.find("QEMU \xef\xbf\xbd\xef\xbf\xbd Ctrl") != std::string::npos);
}

TEST_CASE("a document for a terminal escapes DEL and the C1 controls that JSON leaves raw") {
    Topology topo;
    NvmeController nvme0;
    nvme0.name = "nvme0";
    nvme0.model = "QEMU \x1b[2J\x7f\xc2\x9b"
                  "2J \xc2\xa0\xc3\xa9 \x9b"; // ESC, DEL, CSI; NBSP and e-acute stay
    topo.controllers.push_back(nvme0);
    const auto text = dump_for_terminal(to_json(topo), 2);
    CHECK(text.find("\"QEMU \\u001b[2J\\u007f\\u009b2J \xc2\xa0\xc3\xa9 \xef\xbf\xbd\"") !=
          std::string::npos);
    CHECK(nlohmann::json::parse(text)["controllers"][0]["model"] ==
          "QEMU \x1b[2J\x7f\xc2\x9b"
          "2J \xc2\xa0\xc3\xa9 \xef\xbf\xbd");
}

TEST_CASE("the topology table keeps one line per queue and its columns whatever an IRQ is named") {
    Topology topo;
    BlockDevice vda;
    vda.name = "vda";
    HardwareQueue q;
    q.irq = 36;
    q.irq_name = "virtio1\nreq\x1b[2J\xc0"; // a line break, ESC and a byte that is not UTF-8
    q.completion_cpus = {1};
    q.submit_cpus = {0, 1};
    q.completion_source = CompletionSource::irq_effective_affinity;
    vda.queues.push_back(q);
    topo.devices.push_back(vda);
    const auto table = format_topology_table(topo);
    std::vector<std::string> lines;
    for (size_t at = 0, end; (end = table.find('\n', at)) != std::string::npos; at = end + 1)
        lines.push_back(table.substr(at, end - at));
    REQUIRE(lines.size() == 2);
    CHECK(lines[1].find("virtio1?req?[2J?") != std::string::npos);
    // The completion CPUs stand under their heading.
    CHECK(lines[1].find("1                0-1") == lines[0].find("COMPLETION CPUS"));
}

TEST_CASE("a hidden path disk's dev_t is its line of /proc/diskstats, or unknown with a warning") {
    MultipathTree tree;
    const SysRoot root(tree.root());
    const auto dev_of = [](const Topology& topo, const char* name) {
        const BlockDevice* disk = topo.device(name);
        REQUIRE(disk);
        return disk->dev;
    };
    auto topo = discover_topology(root);
    REQUIRE(topo);
    CHECK(dev_of(*topo, "nvme0c0n1") == "259:0");
    CHECK(dev_of(*topo, "nvme0c1n1") == "259:2");
    CHECK(dev_of(*topo, "nvme0n1") == "259:1"); // the head's own dev file
    CHECK(topo->warnings.empty());

    const auto diskstats = tree.root() / "proc/diskstats";
    // A kernel that gives a hidden disk no dev_t; a line missing; a dev_t
    // that another disk has (a path removed and its minor reused between
    // the reads of sysfs and of /proc/diskstats).
    std::ofstream(diskstats) << "   0       0 nvme0c0n1 11 0 88 4 0 0 0 0 0 0 4 0 0 0 0 0 0\n"
                                " 259       1 nvme0n1 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0\n"
                                " 254       0 nullb0 3 0 24 0 0 0 0 0 0 0 0 0 0 0 0 0 0\n";
    topo = discover_topology(root);
    REQUIRE(topo);
    CHECK(dev_of(*topo, "nvme0c0n1").empty());
    CHECK(dev_of(*topo, "nvme0c1n1").empty());
    CHECK(has_warning(*topo, "nvme0c0n1: /proc/diskstats gives it no dev_t (0:0)",
                      "every disk whose dev_t is not known"));
    CHECK(has_warning(*topo, "nvme0c1n1: not in /proc/diskstats"));
    std::ofstream(diskstats) << " 254 0 nvme0c0n1 1\n 259 x nvme0c1n1 1\n";
    topo = discover_topology(root);
    REQUIRE(topo);
    CHECK(dev_of(*topo, "nvme0c0n1").empty());
    CHECK(has_warning(*topo, "nvme0c0n1: /proc/diskstats gives it 254:0, which another disk has"));
    CHECK(has_warning(*topo, "nvme0c1n1: Failed to parse /proc/diskstats: line 2: expected "
                             "MAJOR:MINOR, got \"259:x\""));
    fs::remove(diskstats);
    topo = discover_topology(root);
    REQUIRE(topo);
    CHECK(dev_of(*topo, "nvme0c1n1").empty());
    CHECK(has_warning(*topo, "nvme0c1n1: Failed to open", "proc/diskstats"));
}

TEST_CASE("a /dev/cpu_dma_latency of other than 4 bytes is unknown, with a warning") {
    MultipathTree tree;
    fs::create_directories(tree.root() / "dev");
    std::ofstream(tree.root() / "dev/cpu_dma_latency") << "abc";
    auto topo = discover_topology(SysRoot(tree.root()));
    REQUIRE(topo);
    CHECK_FALSE(topo->cpu_dma_latency_known);
    CHECK(has_warning(*topo, "Failed to parse /dev/cpu_dma_latency"));
    // Not there (or not readable: not root) is unknown, and no warning.
    fs::remove(tree.root() / "dev/cpu_dma_latency");
    topo = discover_topology(SysRoot(tree.root()));
    REQUIRE(topo);
    CHECK_FALSE(has_warning(*topo, "cpu_dma_latency"));
}

TEST_CASE("an NVMe queue count or namespace ID that does not parse is unknown, with a warning") {
    MultipathTree tree;
    const auto ctrl = tree.root() / "sys/devices/pci0000:00/0000:00:04.0/nvme/nvme1";
    std::ofstream(ctrl / "queue_count") << "4294967301\n";
    std::ofstream(ctrl / "nvme0c1n1/nsid") << "n/a\n";
    auto topo = discover_topology(SysRoot(tree.root()));
    REQUIRE(topo);
    const auto& controllers = topo->controllers;
    const auto nvme1 = std::find_if(controllers.begin(), controllers.end(),
                                    [](const auto& c) { return c.name == "nvme1"; });
    REQUIRE(nvme1 != controllers.end());
    CHECK_FALSE(nvme1->queue_count);
    CHECK(has_warning(*topo, "nvme1/queue_count", "\"4294967301\""));
    REQUIRE(topo->device("nvme0c1n1"));
    CHECK_FALSE(topo->device("nvme0c1n1")->nsid);
    CHECK(has_warning(*topo, "nvme0c1n1/nsid", "\"n/a\""));
    // The largest namespace ID NVMe has is one.
    std::ofstream(ctrl / "nvme0c1n1/nsid") << "4294967294\n";
    topo = discover_topology(SysRoot(tree.root()));
    REQUIRE(topo);
    CHECK(topo->device("nvme0c1n1")->nsid == 4294967294u);
}

TEST_CASE("the sampler leaves out a device whose stat cannot be opened, reads the others, and "
          "opens it once it is there") {
    MultipathTree tree;
    tree.stat_files();
    const SysRoot root(tree.root());
    fs::remove(tree.root() / "sys/block/nvme0n1/stat");
    auto sampler = IoSampler::open(root, {"nvme0n1", "nullb0"});
    REQUIRE(sampler);
    REQUIRE(sampler->warnings().size() == 1);
    CHECK(sampler->warnings()[0].find("sys/block/nvme0n1/stat") != std::string::npos);
    IoSample sample;
    REQUIRE(sampler->sample(sample));
    REQUIRE(sample.devices.size() == 2); // still one slot per device asked for
    CHECK(sample.devices[0].read_ios == 0);
    CHECK(sample.devices[1].read_ios == 1);
    CHECK(sample.irq_counts == std::vector<std::uint64_t>{1, 2, 3});
    CHECK(sampler->leaves_out());
    CHECK(sampler->reopen_left_out(root).empty()); // still not there
    std::ofstream(tree.root() / "sys/block/nvme0n1/stat") << "7 0 8 0 0 0 0 0 0 5 5 0 0 0 0 0 0\n";
    CHECK(sampler->reopen_left_out(root) == std::vector<std::size_t>{0}); // nvme0n1
    CHECK_FALSE(sampler->leaves_out());
    CHECK(sampler->reopen_left_out(root).empty()); // nothing left to open
    REQUIRE(sampler->sample(sample));
    CHECK(sample.devices[0].read_ios == 7);
    CHECK(sample.devices[1].read_ios == 1);
}

TEST_CASE("a CPU whose idle table is unknown is held at POLL while its queue is active") {
    for (const bool broken : {false, true}) {
        CAPTURE(broken);
        FakeTree tree;
        tree.write("sys/devices/system/cpu/cpuidle/current_driver", "intel_idle\n");
        tree.write("sys/devices/system/cpu/cpuidle/current_governor_ro", "menu\n");
        if (broken) // C1 (2 us) would fit; what cannot be read might not
            tree.write("sys/devices/system/cpu/cpu1/cpuidle/state1/residency", "\n");
        auto topo = discover_topology(SysRoot(tree.root()));
        REQUIRE(topo);
        Governor governor(*topo, default_config(), declared_costs(*topo));
        REQUIRE(governor.devices().size() == 1); // vda, its IRQ 36 completing on CPU 1
        IoSample sample;
        sample.irq_counts.assign(40, 0);
        sample.devices.resize(1);
        governor.observe(sample, TimePoint{});
        sample.irq_counts[36] = 2000;
        sample.devices[0].read_ios = 2000;
        sample.devices[0].read_ticks_ms = 200;
        governor.observe(sample, TimePoint{} + std::chrono::milliseconds(5));
        const auto holds = governor.holds();
        if (broken) {
            REQUIRE(holds.percpu.count(1));
            CHECK(holds.percpu.at(1).limit == LatencyLimit{0});
        } else {
            CHECK_FALSE(holds.percpu.count(1)); // every state fits: nothing to hold
        }
    }
}
