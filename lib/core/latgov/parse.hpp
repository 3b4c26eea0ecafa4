// Pure parsers of kernel text. Each one takes the whole file content, accepts
// exactly what the kernel writes (a trailing newline included) and returns an
// Error saying what was wrong otherwise; callers add the file name.
#pragma once

#include "latgov/result.hpp"

#include <charconv>
#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

namespace latgov {

// Sorted, without duplicates.
using CpuSet = std::vector<int>;

// A CPU wake-up latency limit in microseconds; nullopt means "no limit".
using LatencyLimit = std::optional<std::uint32_t>;
// In words, as logs and reports show it: "no limit", "0 us (poll only)",
// "20 us".
std::string describe_limit(LatencyLimit limit);

std::string_view trim(std::string_view text);
// The pieces between separators, empty ones included ("a,,b" -> a, "", b).
std::vector<std::string_view> split(std::string_view text, char separator);
// The pieces between runs of separators ("  a  b " -> a, b).
std::vector<std::string_view> words(std::string_view text, char separator = ' ');

// "0-3,8,10-11" (sysfs lists) and "0, 1, 2" (blk-mq cpu_list). Empty is the
// empty set.
Result<CpuSet> parse_cpu_list(std::string_view text);
std::string format_cpu_list(const CpuSet& cpus); // "0-3,8"

// The whole of `text` as a number: no space, no '+', nothing after it, a
// finite value for a floating-point T. False if not (`out` then unspecified).
template <typename T>
bool parse_whole(std::string_view text, T& out) {
    if (text.empty())
        return false;
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), out);
    if (ec != std::errc{} || end != text.data() + text.size())
        return false;
    if constexpr (std::is_floating_point_v<T>)
        return std::isfinite(out);
    return true;
}

Result<std::uint64_t> parse_u64(std::string_view text);
// For values the kernel keeps in 32 bits (cpuidle latencies, NVMe queue
// counts and namespace IDs): a larger one is an error, not a truncation.
Result<std::uint32_t> parse_u32(std::string_view text);

// Where the first byte that is not well-formed UTF-8 sits, 1-based line and
// column; nullopt when all of it is. TOML text must be UTF-8, and the TOML
// library reads out of bounds on some invalid sequences: check first.
struct TextPosition {
    size_t line = 1;
    size_t column = 1;
};
std::optional<TextPosition> first_invalid_utf8(std::string_view text);
// `text` fit for a terminal: each control character but newline and tab (C0,
// DEL, the C1 controls U+0080..U+009F) and each byte that is not well-formed
// UTF-8 (a lone 0x9b is CSI to a terminal not in UTF-8 mode) becomes '?'.
// Strings read from the system (a device's model, a state's name, a file's
// content) may hold escape sequences; the CLI's text passes through this.
std::string terminal_safe(std::string_view text);
// The same for one field of a line or a table cell (a device's model, an
// IRQ's name): newline and tab become '?' too, so a field read from the
// system adds no line and shifts no column.
std::string terminal_safe_field(std::string_view text);
// The same as the error a TOML file gets: "SOURCE:LINE:COLUMN: not UTF-8".
Result<void> check_toml_utf8(std::string_view text, const std::string& source);

// pm_qos_resume_latency_us: "0" = no limit, "n/a" = 0 us, "N" = N us.
Result<LatencyLimit> parse_resume_latency(std::string_view text);
std::string format_resume_latency(LatencyLimit limit);

// /dev/cpu_dma_latency reads back 4 bytes, a native s32; 2000000000 is the
// "no limit" default.
inline constexpr std::int32_t cpu_dma_latency_none = 2000000000;
Result<LatencyLimit> parse_cpu_dma_latency(std::string_view bytes);

// /sys/block/<disk>/stat, the 11 to 17 fields of Documentation/block/stat.rst.
struct BlockStat {
    std::uint64_t read_ios = 0;
    std::uint64_t read_ticks_ms = 0;
    std::uint64_t write_ios = 0;
    std::uint64_t write_ticks_ms = 0;
    std::uint64_t in_flight = 0;
    std::uint64_t io_ticks_ms = 0;
    std::uint64_t discard_ios = 0;
    std::uint64_t discard_ticks_ms = 0;
    std::uint64_t flush_ios = 0;
    std::uint64_t flush_ticks_ms = 0;
};
Result<BlockStat> parse_block_stat(std::string_view text);

// Requests completed, and the time they took, between two samples. The
// kernel prints the tick (ms) counters as 32-bit unsigned values, so they
// wrap: their deltas are taken modulo 2^32. Completions that went backwards
// (the device was replaced) give an empty delta.
struct BlockStatDelta {
    std::uint64_t ios = 0;
    std::uint64_t ticks_ms = 0;
};
BlockStatDelta block_stat_delta(const BlockStat& before, const BlockStat& after);

// The "intr" line of /proc/stat: per-IRQ totals since boot, indexed by IRQ,
// into `counts` (reused from tick to tick: no allocation once grown).
Result<void> parse_stat_intr(std::string_view proc_stat, std::vector<std::uint64_t>& counts);

// /sys/kernel/irq/<n>/per_cpu_count: the IRQ's count on each CPU, comma
// separated. Their sum as /proc/stat's "intr" line shows it: 32 bits wide,
// so that irq_count_delta() takes one against the other.
Result<std::uint64_t> parse_irq_per_cpu_count(std::string_view text);

// debugfs block/<disk>/hctxN/tags: the value of "busy=". A queue no CPU
// maps to has no tags, and its file is empty: nothing is busy there.
Result<std::uint64_t> parse_tags_busy(std::string_view text);

// A kernel dev_t as tracepoints show it: MAJOR << 20 | MINOR.
Result<std::uint32_t> parse_kernel_dev(std::string_view major_minor);

// The "MAJOR:MINOR" that /proc/diskstats gives disk `name` (each line:
// major, minor, name, then counters), checked as parse_kernel_dev would;
// nullopt when no line names it. It lists hidden NVMe multipath path disks,
// whose dev_t sysfs does not show ("0:0" where the kernel gave them none).
Result<std::optional<std::string>> parse_diskstats_dev(std::string_view diskstats,
                                                       std::string_view name);

// Text as an error message quotes it: in double quotes, cut after 40
// characters ("...") so a message stays one readable line.
std::string in_quotes(std::string_view text);

} // namespace latgov
