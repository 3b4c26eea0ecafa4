// What the kernel's block_rq_issue tracepoint gives latgovd: its format
// (tracefs text) and the samples in a perf ring. Pure: the ring is bytes.
#pragma once

#include "latgov/result.hpp"

#include <cstdint>
#include <string_view>
#include <vector>

namespace latgov {

// The tracepoint's id and where the `dev` field sits in its raw record, from
// tracefs events/block/block_rq_issue/{id,format}.
struct TracepointFormat {
    std::uint64_t id = 0;
    std::uint32_t dev_offset = 0;
};
Result<TracepointFormat> parse_tracepoint_format(std::string_view id_text,
                                                 std::string_view format_text);

struct IssuedRequest {
    int cpu = 0;
    std::uint32_t dev = 0;
    std::uint64_t time_ns = 0; // CLOCK_MONOTONIC
};

// Pure: the samples in a perf ring's data area (`size` bytes, positions
// taken modulo size) from `tail` to `head`; returns the new tail. A record
// that cannot be the kernel's (too short, past head) ends the scan.
std::uint64_t read_issue_samples(const unsigned char* data, std::uint64_t size, std::uint64_t tail,
                                 std::uint64_t head, std::uint32_t dev_offset, int cpu,
                                 std::vector<IssuedRequest>& out);

} // namespace latgov
