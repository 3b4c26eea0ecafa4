#include "latgov/perf_records.hpp"

#include "latgov/parse.hpp"

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <linux/perf_event.h>
#include <optional>
#include <string>

namespace latgov {

namespace {

struct Field {
    std::uint32_t offset = 0;
    std::uint32_t size = 0;
};

// The offset and size of the field whose declaration starts with `decl`
// ("field:dev_t dev;"), or nothing when the format has no such field.
Result<std::optional<Field>> find_field(std::string_view format_text, std::string_view decl,
                                        std::string_view name) {
    auto pos = format_text.find(decl);
    if (pos == std::string_view::npos)
        return std::optional<Field>{};
    auto line_end = format_text.find('\n', pos);
    auto line =
        format_text.substr(pos, line_end == std::string_view::npos ? line_end : line_end - pos);
    auto number = [&](std::string_view key) -> Result<std::uint32_t> {
        auto at = line.find(key);
        auto semi = at == std::string_view::npos ? at : line.find(';', at);
        if (semi == std::string_view::npos)
            return make_error("no " + std::string(key.substr(0, key.size() - 1)) + " for the " +
                              std::string(name) + " field in the tracepoint format");
        auto value = parse_u64(line.substr(at + key.size(), semi - at - key.size()));
        if (!value || *value > UINT32_MAX)
            return make_error("bad " + std::string(key.substr(0, key.size() - 1)) + " of the " +
                              std::string(name) + " field: " +
                              (value ? std::string("too large") : value.error().message));
        return static_cast<std::uint32_t>(*value);
    };
    auto offset = number("offset:");
    if (!offset)
        return offset.error();
    auto size = number("size:");
    if (!size)
        return size.error();
    return std::optional<Field>{Field{*offset, *size}};
}

void copy_from_ring(const unsigned char* data, std::uint64_t size, std::uint64_t at, void* to,
                    std::size_t n) {
    for (std::size_t i = 0; i < n; ++i)
        static_cast<unsigned char*>(to)[i] = data[(at + i) % size];
}

} // namespace

Result<TracepointFormat> parse_tracepoint_format(std::string_view id_text,
                                                 std::string_view format_text) {
    auto id = parse_u64(id_text);
    if (!id)
        return make_error("bad tracepoint id: " + id.error().message);
    if (*id > UINT16_MAX) // what a record's common_type can hold
        return make_error("tracepoint id " + std::to_string(*id) + " is past 65535");
    // trace_entry's type leads every record: the records of two
    // tracepoints in one ring are told apart by it.
    auto type = find_field(format_text, "field:unsigned short common_type;", "common_type");
    if (!type)
        return type.error();
    if (!*type || (*type)->offset != 0 || (*type)->size != 2)
        return make_error("no \"unsigned short common_type\" field of 2 bytes at offset 0 in the "
                          "tracepoint format");
    auto dev = find_field(format_text, "field:dev_t dev;", "dev");
    if (!dev)
        return dev.error();
    if (!*dev)
        return make_error("no \"dev_t dev\" field in the tracepoint format");
    auto rwbs = find_field(format_text, "field:char rwbs[", "rwbs");
    if (!rwbs)
        return rwbs.error();
    TracepointFormat format{*id, (*dev)->offset, 0, 0};
    if (*rwbs) {
        format.rwbs_offset = (*rwbs)->offset;
        format.rwbs_size = (*rwbs)->size;
    }
    return format;
}

bool rwbs_waited(const char* rwbs, std::size_t size) {
    const std::string_view kind(rwbs, ::strnlen(rwbs, size));
    return std::any_of(waited_kinds.begin(), waited_kinds.end(),
                       [&](std::string_view waited) { return kind.starts_with(waited); });
}

std::uint64_t read_issue_samples(const unsigned char* data, std::uint64_t size, std::uint64_t tail,
                                 std::uint64_t head, std::span<const TracepointFormat> formats,
                                 int cpu, std::vector<IssuedRequest>& out) {
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
            // A field is read only where both the raw size and the record hold it.
            auto holds = [&](std::uint32_t offset, std::size_t n) {
                const std::uint64_t end = std::uint64_t{offset} + n;
                return raw_size >= end && fixed + end <= header.size;
            };
            std::uint16_t type = 0;
            if (holds(0, sizeof type))
                copy_out(tail + fixed, &type, sizeof type);
            const auto format = std::find_if(formats.begin(), formats.end(),
                                             [&](const auto& f) { return f.id == type; });
            if (format != formats.end()) {
                if (holds(format->dev_offset, sizeof dev))
                    copy_out(tail + fixed + format->dev_offset, &dev, sizeof dev);
                std::optional<bool> waited;
                char rwbs[16] = {};
                const std::size_t rwbs_size = std::min<std::size_t>(format->rwbs_size, sizeof rwbs);
                if (format->passthrough) {
                    waited = true;
                } else if (rwbs_size > 0 && holds(format->rwbs_offset, rwbs_size)) {
                    copy_out(tail + fixed + format->rwbs_offset, rwbs, rwbs_size);
                    waited = rwbs_waited(rwbs, rwbs_size);
                }
                out.push_back({cpu, dev, time, waited});
            }
        }
        tail += header.size;
    }
    return tail;
}

} // namespace latgov
