// The kernel's uevents, read from a NETLINK_KOBJECT_UEVENT socket the event
// loop polls.
//
// Why not sd_device_monitor_new() or libudev's "udev" monitor: both listen to
// the messages systemd-udevd re-broadcasts after processing, which (1) exist
// only where udevd runs (not in minimal guests, initramfs or containers) and
// (2) never reach a service with PrivateNetwork=, because netlink multicast
// stays in the sender's network namespace. The kernel itself sends every
// uevent to each network namespace owned by the initial user namespace, so
// the kernel group works under the unit's PrivateNetwork=yes. latgovd only
// needs to know *that* a disk, controller or CPU changed (it then reads sysfs
// itself), not udev's database, so the raw kernel messages are enough.
#pragma once

#include "latgov/fd.hpp"
#include "latgov/result.hpp"
#include "latgov/uevent.hpp"

#include <vector>

namespace latgov {

class UeventMonitor {
  public:
    // Subscribes to the kernel's uevent multicast group.
    static Result<UeventMonitor> open();

    int fd() const { return fd_.get(); }

    struct Drained {
        std::vector<Uevent> events; // in arrival order, only the kernel's
        bool lost = false;          // the socket overflowed: some were dropped
    };
    // Every message queued now (the socket is non-blocking).
    Drained drain();

  private:
    explicit UeventMonitor(Fd fd) : fd_(std::move(fd)) {}
    Fd fd_;
};

} // namespace latgov
