// Kernel uevents (the NETLINK_KOBJECT_UEVENT multicast the kernel sends for
// every device added, removed or changed), parsed, and which of them can
// change what latgovd governs.
#pragma once

#include "latgov/result.hpp"

#include <string>
#include <string_view>

namespace latgov {

struct Uevent {
    std::string action;    // add, remove, change, online, offline, bind, ...
    std::string subsystem; // block, nvme, cpu, pci, ...
    std::string devpath;   // /devices/pci0000:00/0000:00:04.0/nvme/nvme0
    // An NVMe controller's asynchronous event that the kernel passed on
    // (NVME_AEN=0x...: a SMART or temperature warning, a notice); empty
    // for any other uevent.
    std::string nvme_aen = {};
};

// One datagram from the kernel: "ACTION@DEVPATH" then NUL-separated
// KEY=VALUE fields. udev's re-broadcasts (they start "libudev") and text
// without ACTION, DEVPATH and SUBSYSTEM are errors.
Result<Uevent> parse_uevent(std::string_view datagram);

// Block disks, NVMe controllers and subsystems, CPUs coming and going, and
// PCI functions (a hot-removed or rescanned controller): the uevents after
// which the map of queues, IRQs and CPUs may be stale.
bool changes_topology(const Uevent& event);

// A disk's `change`: udev sends one whenever a writer closes the disk (its
// watch rule), and partition tables read again send them too; most change
// nothing latgov maps, so a burst of only these is compared with the map
// before a rescan. So is an NVMe controller's `change` that carries an
// asynchronous event (NVME_AEN): a health warning maps nothing, and what an
// event does change (a namespace added) comes with uevents of its own. Every
// other uevent rescans: the `change` that ends a controller reset
// (NVME_EVENT=connected) comes with new IRQs, and a CPU that went offline
// and came back within one burst leaves the same map, but its perf events
// were disabled and its thread unpinned meanwhile.
bool may_change_nothing(const Uevent& event);

} // namespace latgov
