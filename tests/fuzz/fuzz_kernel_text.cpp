// Every pure parser of kernel text and records: the first byte picks one,
// the rest is its input. Each is total (an error value, never a crash) and
// what it accepts formats back to the same value where a formatter exists.
#include "latgov/parse.hpp"
#include "latgov/perf_records.hpp"

#include <cstdlib>
#include <cstring>

namespace {

void check(bool ok) {
    if (!ok)
        std::abort();
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const unsigned char* data, size_t size) {
    if (size == 0)
        return 0;
    const unsigned selector = data[0];
    const std::string_view text(reinterpret_cast<const char*>(data) + 1, size - 1);
    using namespace latgov;
    switch (selector % 10) {
    case 0: { // CPU lists: sysfs and blk-mq cpu_list
        auto cpus = parse_cpu_list(text);
        if (cpus) {
            auto again = parse_cpu_list(format_cpu_list(*cpus));
            check(again && *again == *cpus);
        }
        break;
    }
    case 1: {
        auto limit = parse_resume_latency(text);
        if (limit) {
            auto again = parse_resume_latency(format_resume_latency(*limit));
            check(again && *again == *limit);
        }
        break;
    }
    case 2:
        (void)parse_cpu_dma_latency(text);
        break;
    case 3: { // /sys/block/<d>/stat
        auto stat = parse_block_stat(text);
        if (stat)
            (void)block_stat_delta(*stat, *stat);
        break;
    }
    case 4: { // /proc/stat
        std::vector<std::uint64_t> counts;
        (void)parse_stat_intr(text, counts);
        break;
    }
    case 5:
        (void)parse_tags_busy(text);
        break;
    case 6:
        (void)parse_kernel_dev(text);
        break;
    case 7: { // tracefs id and format, separated by a NUL
        const auto nul = text.find('\0');
        (void)parse_tracepoint_format(text.substr(0, nul), nul == std::string_view::npos
                                                               ? std::string_view{}
                                                               : text.substr(nul + 1));
        break;
    }
    case 8: { // a perf ring: 4 bytes of formats, 8 bytes tail, then the data area
        if (text.size() < 12)
            break;
        std::uint32_t dev_offset = 0;
        std::uint64_t tail = 0;
        std::memcpy(&dev_offset, text.data(), 4);
        std::memcpy(&tail, text.data() + 4, 8);
        const auto* ring = reinterpret_cast<const unsigned char*>(text.data()) + 12;
        const std::uint64_t ring_size = text.size() - 12;
        tail %= ring_size + 1;
        std::vector<IssuedRequest> out;
        // Two tracepoints, as a ring with passthrough events holds; their
        // ids from the same bytes, so that records of both are found.
        const TracepointFormat formats[] = {
            {dev_offset & 0xffff, dev_offset % 4096, dev_offset % 61, dev_offset % 17, false},
            {dev_offset >> 16, dev_offset % 53, dev_offset % 41, dev_offset % 13, true}};
        const auto end =
            read_issue_samples(ring, ring_size, tail, tail + ring_size, formats, 0, out);
        check(end >= tail && end <= tail + ring_size);
        break;
    }
    default:
        (void)parse_u64(text);
        break;
    }
    return 0;
}
