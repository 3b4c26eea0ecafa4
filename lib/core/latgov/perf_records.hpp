// What the kernel's block_getrq tracepoint gives latgovd: its format
// (tracefs text) and the samples in a perf ring. Pure: the ring is bytes.
#pragma once

#include "latgov/result.hpp"

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

namespace latgov {

// The tracepoint of a new block request (tracefs events/block/): hit
// once per request, as blk_mq_submit_bio allocates it, in the task that
// submits it and on that CPU. block_rq_issue would name who dispatched it:
// behind an IO scheduler often kblockd's kworker, on another CPU
// (docs/platform.md, "Who makes a request"). Passthrough requests (NVMe
// ioctls, io_uring commands on /dev/ngXnY) are not made from a bio and do
// not hit it: passthrough_tracepoint sees those.
inline constexpr std::string_view request_tracepoint = "block_getrq";

// The tracepoint that sees passthrough requests: block_rq_issue, narrowed
// by its filter to their kind, rwbs "N" (REQ_OP_DRV_IN/OUT, and any other
// driver-private request: SG_IO on a SCSI disk too). It is hit as such a
// request goes to the driver, in the task that dispatches it: its
// submitter in every trace of docs/platform.md, behind mq-deadline too.
inline constexpr std::string_view passthrough_tracepoint = "block_rq_issue";
inline constexpr std::string_view passthrough_only = "rwbs ~ \"N*\"";

// The requests someone waits for, by how rwbs begins: reads, synchronous
// writes, and the synchronous discards, secure erases and zero-outs that
// submit_bio_wait() makes (blk_fill_rwbs writes a preflush "F", the
// operation, a FUA "F", then "S" for REQ_SYNC). An asynchronous write
// (rwbs "W" with no "S": write-back started by sync_file_range or the
// kernel's flusher) has nobody waiting for it. rwbs_waited() takes these.
inline constexpr std::array<std::string_view, 8> waited_kinds = {"R",    "WS", "WFS", "FWS",
                                                                 "FWFS", "DS", "DES", "NS"};

// waited_kinds as a filter of block_getrq (a unit test holds them equal).
// Each pattern matches from the field's start: the kernel matches one with
// a leading '*' ("*S*") over the whole 8-byte field, past the NUL that ends
// rwbs, over bytes an earlier record left in the CPU's buffer. So filtered,
// a CPU's counter counted asynchronous writes issued beside reads.
inline constexpr std::string_view waited_only =
    "(rwbs ~ \"R*\" || rwbs ~ \"WS*\" || rwbs ~ \"WFS*\" || rwbs ~ \"FWS*\" || rwbs ~ \"FWFS*\" || "
    "rwbs ~ \"DS*\" || rwbs ~ \"DES*\" || rwbs ~ \"NS*\")";

// A tracepoint's id and where the `dev` and `rwbs` fields sit in its raw
// record, from tracefs events/block/<name>/{id,format}. rwbs (the request's
// kind, "R", "WS", "FWFS"...) is char[8] on older kernels, char[10] on
// newer ones; a kernel without it gives size 0. Every raw record starts
// with the id of its tracepoint (common_type), which tells the records of
// two tracepoints in one ring apart.
struct TracepointFormat {
    std::uint64_t id = 0;
    std::uint32_t dev_offset = 0;
    std::uint32_t rwbs_offset = 0;
    std::uint32_t rwbs_size = 0;
    // Its records are passthrough requests, which their submitter waits
    // for (an ioctl, an io_uring completion), whatever rwbs says.
    bool passthrough = false;
};
Result<TracepointFormat> parse_tracepoint_format(std::string_view id_text,
                                                 std::string_view format_text);

struct IssuedRequest {
    int cpu = 0;
    std::uint32_t dev = 0;
    std::uint64_t time_ns = 0; // CLOCK_MONOTONIC
    // A read or a synchronous write (waited_only), or a passthrough request:
    // its submitter waits for it. Asynchronous writeback has nobody
    // waiting. Unknown where the format has no rwbs.
    std::optional<bool> waited;
};

// Whether a request of this rwbs (NUL-terminated within `size`) has a waiter:
// the rule of waited_only, the kernel filter, in C++.
bool rwbs_waited(const char* rwbs, std::size_t size);

// Pure: the samples in a perf ring's data area (`size` bytes, positions
// taken modulo size) from `tail` to `head`; returns the new tail. A record
// that cannot be the kernel's (too short, past head) ends the scan. Each
// raw record is laid out as the format of its tracepoint says; a record of
// a tracepoint not in `formats` is skipped.
std::uint64_t read_issue_samples(const unsigned char* data, std::uint64_t size, std::uint64_t tail,
                                 std::uint64_t head, std::span<const TracepointFormat> formats,
                                 int cpu, std::vector<IssuedRequest>& out);

} // namespace latgov
