// Discovery over a captured sysfs/procfs tree whose files come from the
// input (NUL-separated): the online CPU list, the idle-state files, PM QoS
// values, IRQ affinity lists and names, a namespace's queue CPU list, dev
// and nsid, the debugfs queue type, /dev/cpu_dma_latency.
// Whatever the files say, discovery returns a topology or an error.
#include "latgov/discovery.hpp"
#include "latgov/sysroot.hpp"
#include "latgov/topology.hpp"

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <unistd.h>

namespace fs = std::filesystem;

namespace {

// Files of the vm-4cpu-1ctrl-4q capture (real NVMe sysfs), plus idle
// states, which that capture lacks.
const char* const files[] = {
    "sys/devices/system/cpu/online",
    "sys/devices/system/cpu/cpuidle/current_driver",
    "sys/devices/system/cpu/cpu0/cpuidle/state0/name",
    "sys/devices/system/cpu/cpu0/cpuidle/state0/latency",
    "sys/devices/system/cpu/cpu0/cpuidle/state0/residency",
    "sys/devices/system/cpu/cpu0/cpuidle/state0/disable",
    "sys/devices/system/cpu/cpu0/cpuidle/state1/name",
    "sys/devices/system/cpu/cpu0/cpuidle/state1/latency",
    "sys/devices/system/cpu/cpu0/power/pm_qos_resume_latency_us",
    "proc/irq/25/smp_affinity_list",
    "proc/irq/25/effective_affinity_list",
    "sys/kernel/irq/25/actions",
    "sys/devices/pci0000:00/0000:00:03.0/nvme/nvme0/nvme0n1/mq/0/cpu_list",
    "sys/devices/pci0000:00/0000:00:03.0/nvme/nvme0/nvme0n1/dev",
    "sys/devices/pci0000:00/0000:00:03.0/nvme/nvme0/nvme0n1/nsid",
    "sys/kernel/debug/block/nvme0n1/hctx0/type",
    "dev/cpu_dma_latency",
};

// The capture named by LATGOV_FUZZ_TREE (a .tar.gz), unpacked once into
// LATGOV_FUZZ_DIR (an empty directory that the caller removes, as ctest's
// wrapper does), or into a new directory in /dev/shm whose removal at exit
// libFuzzer skips when it stops on -max_total_time.
const fs::path& root() {
    static const fs::path path = [] {
        const char* tree = std::getenv("LATGOV_FUZZ_TREE");
        const char* given = std::getenv("LATGOV_FUZZ_DIR");
        char pattern[] = "/dev/shm/latgov-fuzz.XXXXXX";
        if (!tree) {
            std::fprintf(stderr, "fuzz_sysfs_tree: set LATGOV_FUZZ_TREE to a capture .tar.gz\n");
            std::abort();
        }
        const char* dir = given ? given : ::mkdtemp(pattern);
        if (!dir) {
            std::perror("fuzz_sysfs_tree: mkdtemp /dev/shm/latgov-fuzz.XXXXXX");
            std::abort();
        }
        fs::path p = dir;
        const std::string unpack = "tar -xzf '" + std::string(tree) + "' -C '" + p.string() + "'";
        if (std::system(unpack.c_str()) != 0)
            std::abort();
        if (!given)
            std::atexit([] { fs::remove_all(root()); });
        return p;
    }();
    return path;
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const unsigned char* data, size_t size) {
    const std::string_view input(reinterpret_cast<const char*>(data), size);
    const auto& base = root();
    size_t pos = 0;
    for (const char* name : files) {
        const auto end = std::min(input.find('\0', pos), input.size());
        const auto path = base / name;
        fs::create_directories(path.parent_path());
        std::ofstream(path, std::ios::trunc | std::ios::binary)
            << input.substr(std::min(pos, input.size()), end - std::min(pos, input.size()));
        pos = end + 1;
    }
    auto topology = latgov::discover_topology(latgov::SysRoot(base));
    (void)topology;
    return 0;
}
