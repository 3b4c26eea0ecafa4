#include "latgov/uevent_monitor.hpp"

#include <array>
#include <cerrno>
#include <cstring>
#include <linux/netlink.h>
#include <string>
#include <sys/socket.h>

namespace latgov {

namespace {

// The kernel's multicast group (udev's re-broadcast is group 2).
constexpr unsigned kernel_group = 1;
// A hot-plugged controller with its namespaces, or a CPU hotplug on a large
// machine, sends hundreds of messages at once.
constexpr int receive_buffer = 1 << 20;
// At most this many per wake-up, so a storm cannot hold up the loop; the
// rest wakes it again.
constexpr int max_per_drain = 4096;

} // namespace

Result<UeventMonitor> UeventMonitor::open() {
    Fd fd(::socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC | SOCK_NONBLOCK, NETLINK_KOBJECT_UEVENT));
    if (!fd)
        return make_error(std::string("Failed to open the kernel uevent socket: ") +
                          std::strerror(errno));
    // Beyond rmem_max needs CAP_NET_ADMIN (SO_RCVBUFFORCE); without it the
    // default is kept, and an overflow is handled as lost events.
    if (::setsockopt(fd.get(), SOL_SOCKET, SO_RCVBUFFORCE, &receive_buffer,
                     sizeof receive_buffer) != 0)
        ::setsockopt(fd.get(), SOL_SOCKET, SO_RCVBUF, &receive_buffer, sizeof receive_buffer);
    sockaddr_nl address{};
    address.nl_family = AF_NETLINK;
    address.nl_groups = kernel_group;
    if (::bind(fd.get(), reinterpret_cast<const sockaddr*>(&address), sizeof address) != 0)
        return make_error(std::string("Failed to subscribe to kernel uevents: ") +
                          std::strerror(errno));
    return UeventMonitor(std::move(fd));
}

UeventMonitor::Drained UeventMonitor::drain() {
    Drained out;
    std::array<char, 8192> buffer;
    for (int i = 0; i < max_per_drain; ++i) {
        sockaddr_nl sender{};
        socklen_t sender_len = sizeof sender;
        const auto n = ::recvfrom(fd_.get(), buffer.data(), buffer.size(), MSG_TRUNC,
                                  reinterpret_cast<sockaddr*>(&sender), &sender_len);
        if (n < 0) {
            if (errno == ENOBUFS) { // dropped by the kernel: say so, read on
                out.lost = true;
                continue;
            }
            if (errno == EINTR)
                continue;
            break; // EAGAIN: all read
        }
        // Only the kernel sends with port id 0; a longer message was cut.
        if (sender.nl_pid != 0 || static_cast<size_t>(n) > buffer.size())
            continue;
        if (auto event = parse_uevent(std::string_view(buffer.data(), static_cast<size_t>(n))))
            out.events.push_back(std::move(*event));
    }
    return out;
}

} // namespace latgov
