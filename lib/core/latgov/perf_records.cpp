#include "latgov/perf_records.hpp"

#include "latgov/parse.hpp"

#include <cstddef>
#include <linux/perf_event.h>
#include <string>

namespace latgov {

Result<TracepointFormat> parse_tracepoint_format(std::string_view id_text,
                                                 std::string_view format_text) {
    auto id = parse_u64(id_text);
    if (!id)
        return make_error("bad tracepoint id: " + id.error().message);
    constexpr std::string_view field = "field:dev_t dev;";
    auto pos = format_text.find(field);
    if (pos == std::string_view::npos)
        return make_error("no \"dev_t dev\" field in the tracepoint format");
    auto line_end = format_text.find('\n', pos);
    auto line = format_text.substr(pos, line_end - pos);
    auto off = line.find("offset:");
    auto semi = line.find(';', off);
    if (off == std::string_view::npos || semi == std::string_view::npos)
        return make_error("no offset for the dev field in the tracepoint format");
    auto offset = parse_u64(line.substr(off + 7, semi - off - 7));
    if (!offset)
        return make_error("bad offset of the dev field: " + offset.error().message);
    return TracepointFormat{*id, static_cast<std::uint32_t>(*offset)};
}

namespace {

void copy_from_ring(const unsigned char* data, std::uint64_t size, std::uint64_t at, void* to,
                    std::size_t n) {
    for (std::size_t i = 0; i < n; ++i)
        static_cast<unsigned char*>(to)[i] = data[(at + i) % size];
}

} // namespace

std::uint64_t read_issue_samples(const unsigned char* data, std::uint64_t size, std::uint64_t tail,
                                 std::uint64_t head, std::uint32_t dev_offset, int cpu,
                                 std::vector<IssuedRequest>& out) {
    if (size == 0)
        return head;
    auto copy_out = [&](std::uint64_t at, void* to, std::size_t n) {
        copy_from_ring(data, size, at, to, n);
    };
    // PERF_SAMPLE_TIME then PERF_SAMPLE_RAW: u64 time, u32 size, raw bytes.
    constexpr std::uint64_t fixed = sizeof(perf_event_header) + 8 + 4;
    while (tail < head) {
        perf_event_header header{};
        copy_out(tail, &header, sizeof header);
        if (header.size < sizeof header || header.size > head - tail)
            return head; // not a record the kernel writes: skip the rest
        if (header.type == PERF_RECORD_SAMPLE && header.size >= fixed) {
            std::uint64_t time = 0;
            std::uint32_t raw_size = 0;
            std::uint32_t dev = 0;
            copy_out(tail + sizeof header, &time, sizeof time);
            copy_out(tail + sizeof header + 8, &raw_size, sizeof raw_size);
            const std::uint64_t dev_end = std::uint64_t{dev_offset} + sizeof dev;
            if (raw_size >= dev_end && fixed + dev_end <= header.size)
                copy_out(tail + fixed + dev_offset, &dev, sizeof dev);
            out.push_back({cpu, dev, time});
        }
        tail += header.size;
    }
    return tail;
}

} // namespace latgov
