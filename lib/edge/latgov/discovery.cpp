#include "latgov/discovery.hpp"

#include "latgov/irq_match.hpp"
#include "latgov/parse.hpp"

#include <algorithm>
#include <cerrno>
#include <fcntl.h>
#include <fmt/format.h>
#include <map>
#include <optional>
#include <set>
#include <unistd.h>

namespace latgov {

namespace {

constexpr std::string_view cpu_dir = "/sys/devices/system/cpu";

// Parses the text of the file `path`; the error names the file.
template <typename Parser>
auto parsed(const std::string& path, std::string_view text, Parser parse) -> decltype(parse(text)) {
    auto value = parse(text);
    if (!value)
        return make_error("Failed to parse " + path + ": " + value.error().message);
    return value;
}

// Reads and parses one file; the error names the file.
template <typename Parser>
auto read_parsed(const SysRoot& root, const std::string& path, Parser parse)
    -> decltype(parse(std::string_view{})) {
    auto text = root.read(path);
    if (!text)
        return text.error();
    return parsed(path, *text, parse);
}

Result<std::string> read_trimmed(const SysRoot& root, const std::string& path) {
    auto text = root.read(path);
    if (!text)
        return text.error();
    return std::string(trim(*text));
}

std::string read_optional(const SysRoot& root, const std::string& path) {
    auto text = read_trimmed(root, path);
    return text ? *text : std::string{};
}

// A number only shown, never acted on: a missing file leaves it unknown, a
// value that does not parse does too, with a warning naming the file.
std::optional<std::uint32_t> read_shown_u32(const SysRoot& root, const std::string& path,
                                            std::vector<std::string>& warnings) {
    auto text = root.read(path);
    if (!text)
        return std::nullopt;
    auto value = parse_u32(*text);
    if (!value) {
        warnings.push_back("Failed to parse " + path + ": " + value.error().message);
        return std::nullopt;
    }
    return *value;
}

std::optional<int> to_int(std::string_view text) {
    int value = 0;
    return parse_whole(text, value) ? std::optional<int>(value) : std::nullopt;
}

// Names like "state3", "cpu12", "hctx0": the number after `prefix`.
std::optional<int> numbered(std::string_view name, std::string_view prefix) {
    if (!name.starts_with(prefix))
        return std::nullopt;
    return to_int(name.substr(prefix.size()));
}

Result<IdleState> read_idle_state(const SysRoot& root, const std::string& dir, int index) {
    IdleState state;
    state.index = index;
    auto name = read_trimmed(root, dir + "/name");
    if (!name)
        return name.error();
    state.name = *name;
    auto latency = read_parsed(root, dir + "/latency", parse_u32);
    if (!latency)
        return latency.error();
    auto residency = read_parsed(root, dir + "/residency", parse_u32);
    if (!residency)
        return residency.error();
    auto disabled = read_parsed(root, dir + "/disable", parse_u64);
    if (!disabled)
        return disabled.error();
    state.exit_latency_us = *latency;
    state.target_residency_us = *residency;
    state.disabled = *disabled != 0;
    return state;
}

// `driver_active`: a cpuidle driver is registered, so every CPU has an idle
// table to read; one that cannot be read in full is unknown, not empty.
Cpu read_cpu(const SysRoot& root, int id, bool driver_active, std::vector<std::string>& warnings) {
    Cpu cpu;
    cpu.id = id;
    const std::string dir = std::string(cpu_dir) + "/cpu" + std::to_string(id);
    auto unknown = [&](const std::string& why) {
        // A state left out could be a deep one, entered freely under any
        // limit chosen from the others: the whole table is unusable.
        cpu.idle_states.clear();
        cpu.idle_states_known = false;
        warnings.push_back(why + "; the idle states of cpu" + std::to_string(id) +
                           " are unknown, its limit assumes every state but POLL costs too much");
    };
    if (auto states = root.list(dir + "/cpuidle")) {
        for (const auto& entry : *states) {
            auto index = numbered(entry, "state");
            if (!index)
                continue;
            auto state = read_idle_state(root, dir + "/cpuidle/" + entry, *index);
            if (!state) {
                unknown(state.error().message);
                break;
            }
            cpu.idle_states.push_back(std::move(*state));
        }
        std::sort(cpu.idle_states.begin(), cpu.idle_states.end(),
                  [](const IdleState& a, const IdleState& b) { return a.index < b.index; });
    } else if (driver_active) {
        unknown(states.error().message);
    }
    auto qos = read_parsed(root, dir + "/power/pm_qos_resume_latency_us", parse_resume_latency);
    if (qos) {
        cpu.resume_latency = *qos;
        cpu.resume_latency_known = true;
    } else {
        warnings.push_back(qos.error().message);
    }
    return cpu;
}

// IRQ action names -> numbers, from /sys/kernel/irq/<n>/actions. One IRQ may
// carry several actions ("a,b"): those IRQs go in `shared`.
IrqNames read_irq_names(const SysRoot& root, std::set<int>& shared,
                        std::vector<std::string>& warnings) {
    IrqNames by_name;
    auto irqs = root.list("/sys/kernel/irq");
    if (!irqs) {
        warnings.push_back(irqs.error().message + "; no queue can be matched to its IRQ");
        return by_name;
    }
    for (const auto& entry : *irqs) {
        auto number = to_int(entry);
        if (!number)
            continue;
        auto actions = root.read("/sys/kernel/irq/" + entry + "/actions");
        if (!actions)
            continue; // IRQ freed while we looked
        int named = 0;
        for (auto piece : split(trim(*actions), ',')) {
            auto name = trim(piece);
            if (!name.empty()) {
                by_name.emplace(std::string(name), *number);
                ++named;
            }
        }
        if (named > 1)
            shared.insert(*number);
    }
    return by_name;
}

Result<CpuSet> read_affinity_cpus(const SysRoot& root, int irq) {
    return read_parsed(root, "/proc/irq/" + std::to_string(irq) + "/smp_affinity_list",
                       parse_cpu_list);
}

// nullopt: the kernel has no effective_affinity_list.
Result<std::optional<CpuSet>> read_effective_cpus(const SysRoot& root, int irq) {
    const std::string path = "/proc/irq/" + std::to_string(irq) + "/effective_affinity_list";
    auto effective = read_parsed(root, path, parse_cpu_list);
    if (effective)
        return std::optional<CpuSet>(std::move(*effective));
    // The kernel creates effective_affinity_list only with
    // CONFIG_GENERIC_IRQ_EFFECTIVE_AFF_MASK, which not every architecture or
    // interrupt controller selects. Only its absence means that, and the
    // read's error keeps no errno, so open(2) is asked: a file that is there
    // but cannot be read or parsed is still an error. (An IRQ freed since
    // smp_affinity_list was read looks the same; the uevent of the device
    // that freed it brings a rescan.)
    if (root.open(path, O_PATH | O_CLOEXEC) || errno != ENOENT)
        return effective.error();
    return std::optional<CpuSet>();
}

// The CPUs that complete an IRQ: its effective ones. Without an effective
// mask the kernel does not say which CPU of the affinity takes the
// interrupt (the controller picks one, or spreads them), so every online
// one of them is taken to complete. An IRQ that is shut down (all its CPUs
// offline) may have no effective CPU (x86 shows an online one it will not
// fire on); it would come back on one of its affinity CPUs. Left empty when
// none of them is online: the kernel shuts a managed IRQ down then (its
// queue's submitters are offline too, so no IO comes), and gives any other
// IRQ the online CPUs as its affinity, which smp_affinity_list then shows.
CpuSet completing_cpus(const std::optional<CpuSet>& effective, const CpuSet& affinity,
                       const CpuSet& online) {
    if (effective && !effective->empty())
        return *effective;
    CpuSet cpus;
    std::set_intersection(affinity.begin(), affinity.end(), online.begin(), online.end(),
                          std::back_inserter(cpus));
    return cpus;
}

// Where an IRQ is completed, as the kernel says now.
struct IrqCompletion {
    CpuSet affinity;
    CpuSet cpus;
    CompletionSource source = CompletionSource::irq_effective_affinity;
};

Result<IrqCompletion> read_irq_completion(const SysRoot& root, int irq, const CpuSet& online) {
    auto affinity = read_affinity_cpus(root, irq);
    if (!affinity)
        return affinity.error();
    auto effective = read_effective_cpus(root, irq);
    if (!effective)
        return effective.error();
    IrqCompletion out;
    out.cpus = completing_cpus(*effective, *affinity, online);
    out.affinity = std::move(*affinity);
    if (!*effective)
        out.source = CompletionSource::irq_affinity;
    return out;
}

// The CPUs that complete `irq` now, as read_irq_completion finds them, in
// one read where the effective mask names them (the 5 s check reads this
// for every governed IRQ; smp_affinity_list matters only without one).
Result<CpuSet> read_completion_cpus(const SysRoot& root, int irq, const CpuSet& online) {
    auto effective = read_effective_cpus(root, irq);
    if (!effective)
        return effective.error();
    if (*effective && !(*effective)->empty())
        return std::move(**effective);
    auto affinity = read_affinity_cpus(root, irq);
    if (!affinity)
        return affinity.error();
    return completing_cpus(*effective, *affinity, online);
}

QueueType parse_queue_type(std::string_view text) {
    auto t = trim(text);
    if (t == "poll")
        return QueueType::poll;
    if (t == "read")
        return QueueType::read;
    return QueueType::default_;
}

struct DiskContext {
    const SysRoot& root;
    const IrqNames& irq_names;
    const std::set<int>& shared_irqs; // carrying more than one action
    const CpuSet& online;
    std::vector<std::string>& warnings;
};

// `abs` with its symlinks followed as the kernel would, inside the root:
// "/sys/block/sda/device" -> "/sys/devices/pci0000:00/.../0:0:0:0". Nullopt
// when the links loop.
std::optional<std::string> follow_links(const SysRoot& root, std::string_view abs) {
    std::vector<std::string> done;
    std::vector<std::string> pending; // components still to walk, the next one last
    auto push = [&pending](std::string_view path) {
        std::vector<std::string> parts;
        for (auto part : split(path, '/'))
            if (!part.empty() && part != ".")
                parts.emplace_back(part);
        pending.insert(pending.end(), parts.rbegin(), parts.rend());
    };
    push(abs);
    for (int links = 0; !pending.empty();) {
        std::string part = std::move(pending.back());
        pending.pop_back();
        if (part == "..") {
            if (!done.empty())
                done.pop_back();
            continue;
        }
        std::string here;
        for (const auto& d : done)
            here += "/" + d;
        here += "/" + part;
        auto target = root.read_link(here);
        if (!target) {
            done.push_back(std::move(part));
            continue;
        }
        if (++links > 40)
            return std::nullopt;
        if (target->starts_with("/"))
            done.clear();
        push(*target);
    }
    std::string out;
    for (const auto& d : done)
        out += "/" + d;
    return out.empty() ? std::string("/") : out;
}

// The MSI IRQs of the PCI function behind a disk and their affinity, by IRQ
// number, for matching queues by mask when no naming rule applies. The
// function is the nearest parent of the disk's device with msi_irqs, however
// deep (a SCSI disk sits four levels below its HBA's function).
std::vector<std::pair<int, CpuSet>> read_msi_affinities(const SysRoot& root,
                                                        const std::string& disk) {
    std::vector<std::pair<int, CpuSet>> out;
    auto dir = follow_links(root, "/sys/block/" + disk + "/device");
    if (!dir)
        return out;
    constexpr std::string_view devices = "/sys/devices/";
    for (std::string at = *dir; at.starts_with(devices) && at.size() > devices.size();
         at.erase(at.rfind('/'))) {
        auto names = root.list(at + "/msi_irqs");
        if (!names)
            continue;
        std::vector<int> irqs;
        for (const auto& name : *names)
            if (auto irq = to_int(name))
                irqs.push_back(*irq);
        std::sort(irqs.begin(), irqs.end()); // listed as text: "100" before "99"
        for (int irq : irqs)
            if (auto cpus = read_affinity_cpus(root, irq))
                out.emplace_back(irq, std::move(*cpus));
        return out;
    }
    return out;
}

// The CPUs that submit to the hardware queue `mq` ("/sys/block/X/mq/N").
// Its cpu_list is printed into one page, and kernels that print it so end
// the list early where it does not fit, silently, at a whole item: a queue
// of several hundred CPUs (a disk with one queue on a large host) lists
// only some of them. Where the text may have been cut, the queue's cpuN
// directories, one per CPU mapped to it, are read too.
Result<CpuSet> read_submit_cpus(const SysRoot& root, const std::string& mq) {
    const std::string path = mq + "/cpu_list";
    auto text = root.read(path);
    if (!text)
        return text.error();
    auto cpus = parsed(path, *text, parse_cpu_list);
    if (!cpus)
        return cpus;
    constexpr std::size_t longest_item = std::string_view(", 4294967295\n").size();
    const long page = ::sysconf(_SC_PAGESIZE);
    if (text->size() + longest_item < static_cast<std::size_t>(page > 0 ? page : 4096))
        return cpus;
    auto names = root.list(mq);
    if (!names)
        return make_error(path +
                          " fills a page and may have been cut short, and its CPUs cannot "
                          "be listed instead: " +
                          names.error().message);
    for (const auto& name : *names)
        if (auto cpu = numbered(name, "cpu"))
            cpus->push_back(*cpu);
    std::sort(cpus->begin(), cpus->end());
    cpus->erase(std::unique(cpus->begin(), cpus->end()), cpus->end());
    return cpus;
}

// `nvme_irqs_seen`: the controller's admin queue IRQ "<ctrl>q0" is among the
// IRQ names, so a queue without one of its own is really without one.
Result<HardwareQueue> read_queue(const DiskContext& ctx, const BlockDevice& disk,
                                 const DiskIrqFacts& facts, int index, bool nvme_irqs_seen) {
    HardwareQueue queue;
    queue.index = index;
    const std::string hctx = std::to_string(index);
    auto submit = read_submit_cpus(ctx.root, "/sys/block/" + disk.name + "/mq/" + hctx);
    if (!submit)
        return submit.error();
    queue.submit_cpus = std::move(*submit);
    const std::string debug_type =
        "/sys/kernel/debug/block/" + disk.name + "/hctx" + hctx + "/type";
    const auto type = ctx.root.read(debug_type);
    if (type)
        queue.type = parse_queue_type(*type);

    std::string ambiguous;
    auto irq =
        match_queue_irq(ctx.irq_names, facts, index, queue.type, queue.submit_cpus, &ambiguous);
    if (!ambiguous.empty())
        ctx.warnings.push_back(disk.name + ": " + ambiguous);
    if (!irq && disk.kind == DeviceKind::nvme && disk.transport == "pcie") {
        if (!type && nvme_irqs_seen) {
            // A PCIe controller's queue without an IRQ while its other
            // vectors are there is a poll queue (debugfs, not mounted here,
            // would say so).
            queue.type = QueueType::poll;
        } else if (queue.type != QueueType::poll && nvme_irqs_seen) {
            ctx.warnings.push_back(disk.name + ": hardware queue " + hctx + " (" +
                                   std::string(to_string(queue.type)) + ") has no IRQ " +
                                   facts.controller + "q" + std::to_string(index + 1) +
                                   "; taken to complete on its submitting CPUs");
        }
    }
    // Any other queue without an IRQ of its own completes where it is
    // submitted (the else below): NVMe over fabrics (tcp, rdma, fc, loop)
    // names no IRQ per queue, and without /sys/kernel/irq none is known.
    if (irq) {
        auto completion = read_irq_completion(ctx.root, irq->irq, ctx.online);
        if (!completion)
            return completion.error();
        queue.irq = irq->irq;
        queue.irq_name = irq->name;
        queue.irq_affinity = std::move(completion->affinity);
        queue.completion_cpus = std::move(completion->cpus);
        queue.completion_source = completion->source;
    } else if (queue.type != QueueType::poll) {
        // The online ones: blk-mq's cpu_list keeps a CPU that went offline.
        std::set_intersection(queue.submit_cpus.begin(), queue.submit_cpus.end(),
                              ctx.online.begin(), ctx.online.end(),
                              std::back_inserter(queue.completion_cpus));
        queue.completion_source = CompletionSource::submit_cpus;
    }
    return queue;
}

// An NVMe disk name: nvme<S>n<N> (namespace or multipath head) or
// nvme<S>c<C>n<N> (a hidden multipath path).
struct NvmeDiskName {
    std::string subsystem;
    std::string controller; // empty for nvme<S>n<N>
    std::string ns;
};

std::optional<NvmeDiskName> parse_nvme_disk_name(std::string_view name) {
    auto digits = [&name]() {
        size_t n = 0;
        while (n < name.size() && name[n] >= '0' && name[n] <= '9')
            ++n;
        std::string out(name.substr(0, n));
        name.remove_prefix(n);
        return out;
    };
    if (!name.starts_with("nvme"))
        return std::nullopt;
    name.remove_prefix(4);
    NvmeDiskName parsed;
    parsed.subsystem = digits();
    if (parsed.subsystem.empty())
        return std::nullopt;
    if (name.starts_with("c")) {
        name.remove_prefix(1);
        parsed.controller = digits();
        if (parsed.controller.empty())
            return std::nullopt;
    }
    if (!name.starts_with("n"))
        return std::nullopt;
    name.remove_prefix(1);
    parsed.ns = digits();
    if (parsed.ns.empty() || !name.empty())
        return std::nullopt;
    return parsed;
}

// nullopt: not a blk-mq disk (zram, a bio-based device), nothing to govern.
Result<std::optional<BlockDevice>> read_disk(const DiskContext& ctx, const std::string& name,
                                             const std::vector<NvmeController>& controllers) {
    BlockDevice disk;
    disk.name = name;
    const std::string dir = "/sys/block/" + name;
    const auto nvme_name = parse_nvme_disk_name(name);
    // Hidden multipath path disks have no dev file (see read_path_devs).
    const bool path_disk = nvme_name && !nvme_name->controller.empty();
    if (auto dev = read_trimmed(ctx.root, dir + "/dev"))
        disk.dev = *dev;
    else if (!path_disk)
        return dev.error();

    auto link = ctx.root.link_basename(dir + "/device");
    if (!link && nvme_name)
        return link.error(); // the controller (or subsystem) is not known
    const std::string device = link ? *link : std::string{};
    if (path_disk) {
        disk.kind = DeviceKind::nvme;
        disk.hidden = true;
        disk.multipath_head = "nvme" + nvme_name->subsystem + "n" + nvme_name->ns;
    } else if (nvme_name) {
        disk.kind =
            device.starts_with("nvme-subsys") ? DeviceKind::nvme_multipath_head : DeviceKind::nvme;
    } else if (device.starts_with("virtio")) {
        disk.kind = DeviceKind::virtio_blk;
        disk.transport = "virtio";
    }

    if (disk.kind == DeviceKind::nvme || disk.kind == DeviceKind::nvme_multipath_head) {
        if (disk.kind == DeviceKind::nvme)
            disk.controller = device;
        disk.nsid = read_shown_u32(ctx.root, dir + "/nsid", ctx.warnings);
        disk.wwid = read_optional(ctx.root, dir + "/wwid");
    } else {
        disk.serial = read_optional(ctx.root, dir + "/serial");
        disk.model = read_optional(ctx.root, dir + "/device/model");
    }
    const NvmeController* ctrl = nullptr;
    for (const auto& c : controllers)
        if (c.name == disk.controller)
            ctrl = &c;
    if (ctrl) {
        disk.model = ctrl->model;
        disk.serial = ctrl->serial;
        disk.transport = ctrl->transport;
        // While a controller resets or reconnects its I/O queues' IRQs are
        // freed: what discovery would read of them is no mapping at all.
        // The device comes back with the rescan its state change brings.
        if (!ctrl->state.empty() && ctrl->state != "live")
            return make_error("controller " + ctrl->name + " is " + ctrl->state + ", not live");
    }

    if (disk.kind == DeviceKind::nvme_multipath_head)
        return std::optional{std::move(disk)}; // bio-based: its I/O runs on the path disks
    if (!ctx.root.exists(dir + "/mq"))
        return std::optional<BlockDevice>{};
    auto hctxs = ctx.root.list(dir + "/mq");
    if (!hctxs)
        return hctxs.error();
    std::vector<int> indexes;
    for (const auto& entry : *hctxs)
        if (auto index = to_int(entry))
            indexes.push_back(*index);
    std::sort(indexes.begin(), indexes.end());
    DiskIrqFacts facts{disk.kind, disk.controller, device, {}};
    if (disk.kind != DeviceKind::nvme)
        facts.msi_affinities = read_msi_affinities(ctx.root, name);
    if (disk.kind == DeviceKind::virtio_blk)
        facts.shared_irqs = ctx.shared_irqs;
    const bool nvme_irqs_seen =
        disk.kind == DeviceKind::nvme && ctx.irq_names.contains(disk.controller + "q0");
    for (int index : indexes) {
        auto queue = read_queue(ctx, disk, facts, index, nvme_irqs_seen);
        if (!queue)
            return queue.error();
        disk.queues.push_back(std::move(*queue));
    }
    return std::optional{std::move(disk)};
}

Result<NvmeController> read_controller(const SysRoot& root, const std::string& name,
                                       std::vector<std::string>& warnings) {
    NvmeController ctrl;
    ctrl.name = name;
    const std::string dir = "/sys/class/nvme/" + name;
    auto transport = read_trimmed(root, dir + "/transport");
    if (!transport)
        return transport.error();
    ctrl.transport = *transport;
    ctrl.address = read_optional(root, dir + "/address");
    ctrl.model = read_optional(root, dir + "/model");
    ctrl.serial = read_optional(root, dir + "/serial");
    ctrl.firmware = read_optional(root, dir + "/firmware_rev");
    ctrl.subsystem_nqn = read_optional(root, dir + "/subsysnqn");
    ctrl.state = read_optional(root, dir + "/state");
    ctrl.queue_count = read_shown_u32(root, dir + "/queue_count", warnings);
    return ctrl;
}

// A hidden path disk's dev_t, which sysfs does not show: /proc/diskstats
// lists it (Debian 12's 6.1 does; a kernel that gave the disk none prints
// 0:0 there), and block_getrq names the path's requests by it. A path
// left without one takes the requests of every disk whose dev_t latgov
// does not know.
void read_path_devs(const SysRoot& root, Topology& topo) {
    const auto unknown = [](const BlockDevice& d) { return d.hidden && d.dev.empty(); };
    if (std::none_of(topo.devices.begin(), topo.devices.end(), unknown))
        return;
    std::set<std::uint32_t> shown; // dev_t of the disks sysfs shows
    for (const auto& disk : topo.devices)
        if (auto dev = parse_kernel_dev(disk.dev))
            shown.insert(*dev);
    const std::string fallback =
        "; taken to issue the requests of every disk whose dev_t is not known";
    auto diskstats = root.read("/proc/diskstats");
    for (auto& disk : topo.devices) {
        if (!unknown(disk))
            continue;
        if (!diskstats) {
            topo.warnings.push_back(disk.name + ": " + diskstats.error().message + fallback);
            continue;
        }
        auto dev = parse_diskstats_dev(*diskstats, disk.name);
        if (!dev) {
            topo.warnings.push_back(
                disk.name + ": Failed to parse /proc/diskstats: " + dev.error().message + fallback);
        } else if (!*dev) {
            topo.warnings.push_back(disk.name + ": not in /proc/diskstats" + fallback);
        } else if (const auto number = parse_kernel_dev(**dev); *number >> 20 == 0) {
            topo.warnings.push_back(disk.name + ": /proc/diskstats gives it no dev_t (" + **dev +
                                    ")" + fallback);
        } else if (shown.contains(*number)) {
            // Read after sysfs: a path removed and its minor reused since.
            topo.warnings.push_back(disk.name + ": /proc/diskstats gives it " + **dev +
                                    ", which another disk has" + fallback);
        } else {
            disk.dev = std::move(**dev);
        }
    }
}

} // namespace

Result<Topology> discover_topology(const SysRoot& root) {
    Topology topo;
    auto online = read_parsed(root, std::string(cpu_dir) + "/online", parse_cpu_list);
    if (!online)
        return online.error();
    topo.online_cpus = std::move(*online);
    topo.cpuidle_driver = read_optional(root, std::string(cpu_dir) + "/cpuidle/current_driver");
    topo.cpuidle_governor =
        read_optional(root, std::string(cpu_dir) + "/cpuidle/current_governor_ro");
    if (topo.cpuidle_governor.empty())
        topo.cpuidle_governor =
            read_optional(root, std::string(cpu_dir) + "/cpuidle/current_governor");
    const bool driver_active = !topo.cpuidle_driver.empty() && topo.cpuidle_driver != "none";
    for (int id : topo.online_cpus)
        topo.cpus.push_back(read_cpu(root, id, driver_active, topo.warnings));

    // Unreadable (not root) it is unknown; read and not 4 bytes, it says so.
    if (auto bytes = root.read("/dev/cpu_dma_latency")) {
        if (auto global = parse_cpu_dma_latency(*bytes)) {
            topo.cpu_dma_latency = *global;
            topo.cpu_dma_latency_known = true;
        } else {
            topo.warnings.push_back("Failed to parse /dev/cpu_dma_latency: " +
                                    global.error().message);
        }
    }

    if (auto names = root.list("/sys/class/nvme")) {
        for (const auto& name : *names) {
            auto ctrl = read_controller(root, name, topo.warnings);
            if (!ctrl) {
                topo.warnings.push_back(ctrl.error().message + ", skipping controller " + name);
                continue;
            }
            topo.controllers.push_back(std::move(*ctrl));
        }
    }

    std::set<int> shared_irqs;
    auto irq_names = read_irq_names(root, shared_irqs, topo.warnings);
    auto disks = root.list("/sys/block");
    if (!disks)
        return disks.error();
    DiskContext ctx{root, irq_names, shared_irqs, topo.online_cpus, topo.warnings};
    for (const auto& name : *disks) {
        auto disk = read_disk(ctx, name, topo.controllers);
        if (disk) {
            if (*disk)
                topo.devices.push_back(std::move(**disk));
        } else {
            topo.warnings.push_back(disk.error().message + ", skipping device " + name);
        }
    }
    // The kernel adds a multipath head once one of its paths is usable (ANA
    // optimized or non-optimized); until then no IO can be sent to its
    // paths.
    std::set<std::string> names;
    for (const auto& disk : topo.devices)
        names.insert(disk.name);
    std::erase_if(topo.devices, [&](const BlockDevice& path) {
        if (path.multipath_head.empty() || names.contains(path.multipath_head))
            return false;
        topo.warnings.push_back("multipath head /sys/block/" + path.multipath_head +
                                " is missing, skipping device " + path.name);
        return true;
    });
    read_path_devs(root, topo);
    // A multipath head lists its paths.
    for (auto& head : topo.devices) {
        if (head.kind != DeviceKind::nvme_multipath_head)
            continue;
        for (const auto& path : topo.devices)
            if (path.multipath_head == head.name)
                head.paths.push_back(path.name);
        if (!head.paths.empty()) {
            const BlockDevice* first = topo.device(head.paths.front());
            head.model = first->model;
            head.serial = first->serial;
            head.transport = first->transport;
        }
    }
    return topo;
}

std::optional<std::string> moved_irq(const SysRoot& root, const Topology& topology,
                                     const std::vector<std::string>& devices) {
    // Read once per IRQ: queues may share one (a controller's single
    // vector, virtio's shared virtqueue vector). Nullopt: unreadable, gone
    // with its device, whose uevent brings a rescan; not taken for a move.
    std::map<int, std::optional<CpuSet>> now_by_irq;
    for (const auto& d : topology.devices) {
        if (std::find(devices.begin(), devices.end(), d.name) == devices.end())
            continue;
        for (const auto& q : d.queues) {
            if (!q.irq)
                continue;
            auto [it, fresh] = now_by_irq.try_emplace(*q.irq);
            if (fresh) {
                if (auto cpus = read_completion_cpus(root, *q.irq, topology.online_cpus))
                    it->second = std::move(*cpus);
            }
            const auto& now = it->second;
            if (!now || *now == q.completion_cpus)
                continue;
            return fmt::format(
                "IRQ {} ({}) of {} queue {} completes on cpus {} now, not {}", *q.irq, q.irq_name,
                d.name, q.index, now->empty() ? "none" : format_cpu_list(*now),
                q.completion_cpus.empty() ? "none" : format_cpu_list(q.completion_cpus));
        }
    }
    return std::nullopt;
}

} // namespace latgov
