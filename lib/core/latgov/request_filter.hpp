// Which block requests wake an idle daemon, as perf tracepoint filters on
// block_getrq's `dev` field (MAJOR << 20 | MINOR, the whole disk's dev_t).
//
// The kernel takes a filter of at most a page less one byte
// (PERF_EVENT_IOC_SET_FILTER copies it with strndup_user(..., PAGE_SIZE)),
// and only one filter per event. The devices are written as few terms as
// possible (runs of consecutive dev_t become ranges) and split over as many
// filters as needed; each filter goes to its own perf event, and together
// they match what one long filter would.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace latgov {

// The major of every NVMe namespace (BLOCK_EXT_MAJOR): gendisks without a
// major of their own take a minor from the kernel's extended pool.
constexpr std::uint32_t block_ext_major = 259;

struct WatchedDevs {
    // Governed disks of known dev_t (their /sys/block/<d>/dev, or a hidden
    // path's line of /proc/diskstats).
    std::vector<std::uint32_t> devs;
    // A hidden multipath path disk (nvme<S>c<C>n<N>) whose dev_t is not
    // known is governed. Its requests carry a dev_t of the extended major,
    // which sysfs does not show (device_add_disk gives a hidden disk no
    // devt) and /proc/diskstats did not list, so they are matched as every
    // extended-major dev_t except `others`.
    bool hidden_paths = false;
    // Disks with request queues, of known dev_t, that are not governed:
    // their requests must not wake the daemon.
    std::vector<std::uint32_t> others;

    bool operator==(const WatchedDevs&) const = default;
};

// "dev == N" and "(dev >= A && dev <= B)" terms, sorted, that together
// match exactly the requests of `watched`. Empty: every request (nothing
// to tell disks apart by).
std::vector<std::string> request_filter_terms(const WatchedDevs& watched);

// The terms joined with " || " into as few disjunctions as possible, each at
// most `room` characters long. At least one (empty when `terms` is).
std::vector<std::string> join_terms_within(const std::vector<std::string>& terms, std::size_t room);

} // namespace latgov
