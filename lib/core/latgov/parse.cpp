#include "latgov/parse.hpp"

#include <algorithm>
#include <array>
#include <charconv>
#include <cstring>
#include <utility>

namespace latgov {

std::string_view trim(std::string_view text) {
    constexpr std::string_view space = " \t\n\r";
    auto first = text.find_first_not_of(space);
    if (first == std::string_view::npos)
        return {};
    auto last = text.find_last_not_of(space);
    return text.substr(first, last - first + 1);
}

std::vector<std::string_view> split(std::string_view text, char separator) {
    std::vector<std::string_view> pieces;
    size_t start = 0;
    for (;;) {
        size_t end = text.find(separator, start);
        if (end == std::string_view::npos) {
            pieces.push_back(text.substr(start));
            return pieces;
        }
        pieces.push_back(text.substr(start, end - start));
        start = end + 1;
    }
}

std::vector<std::string_view> words(std::string_view text, char separator) {
    std::vector<std::string_view> out;
    for (auto piece : split(text, separator))
        if (!piece.empty())
            out.push_back(piece);
    return out;
}

std::string in_quotes(std::string_view text) {
    constexpr size_t max = 40;
    std::string s(text.substr(0, max));
    return "\"" + s + (text.size() > max ? "...\"" : "\"");
}

Result<CpuSet> parse_cpu_list(std::string_view text) {
    constexpr int max_cpu = 65535;
    CpuSet cpus;
    std::vector<std::pair<int, int>> ranges;
    text = trim(text);
    if (text.empty())
        return cpus;
    for (auto piece : split(text, ',')) {
        auto item = trim(piece);
        auto dash = item.find('-');
        int lo = 0;
        int hi = 0;
        if (dash == std::string_view::npos) {
            if (!parse_whole(item, lo))
                return make_error("bad CPU number " + in_quotes(item) + " in list " +
                                  in_quotes(text));
            hi = lo;
        } else if (!parse_whole(item.substr(0, dash), lo) ||
                   !parse_whole(item.substr(dash + 1), hi)) {
            return make_error("bad CPU range " + in_quotes(item) + " in list " + in_quotes(text));
        }
        if (lo < 0 || hi < lo || hi > max_cpu)
            return make_error("bad CPU range " + in_quotes(item) + " in list " + in_quotes(text));
        ranges.emplace_back(lo, hi);
    }
    // Merged before they are expanded: a list that repeats a wide range
    // still gives at most max_cpu + 1 CPUs, however long its text.
    std::sort(ranges.begin(), ranges.end());
    int next = 0; // one past the highest CPU added
    for (auto [lo, hi] : ranges) {
        for (int cpu = std::max(lo, next); cpu <= hi; ++cpu)
            cpus.push_back(cpu);
        next = std::max(next, hi + 1);
    }
    return cpus;
}

std::string format_cpu_list(const CpuSet& cpus) {
    std::string out;
    for (size_t i = 0; i < cpus.size();) {
        size_t j = i;
        while (j + 1 < cpus.size() && cpus[j + 1] == cpus[j] + 1)
            ++j;
        if (!out.empty())
            out += ',';
        out += std::to_string(cpus[i]);
        if (j > i)
            out += '-' + std::to_string(cpus[j]);
        i = j + 1;
    }
    return out;
}

Result<std::uint64_t> parse_u64(std::string_view text) {
    std::uint64_t value = 0;
    if (!parse_whole(trim(text), value))
        return make_error("expected an unsigned number, got " + in_quotes(trim(text)));
    return value;
}

Result<std::uint32_t> parse_u32(std::string_view text) {
    std::uint32_t value = 0;
    if (!parse_whole(trim(text), value))
        return make_error("expected an unsigned 32-bit number, got " + in_quotes(trim(text)));
    return value;
}

Result<LatencyLimit> parse_resume_latency(std::string_view text) {
    auto t = trim(text);
    if (t == "n/a")
        return LatencyLimit{0};
    std::uint32_t us = 0;
    if (!parse_whole(t, us))
        return make_error("expected \"n/a\" or microseconds, got " + in_quotes(t));
    if (us == 0)
        return LatencyLimit{};
    return LatencyLimit{us};
}

std::string describe_limit(LatencyLimit limit) {
    if (!limit)
        return "no limit";
    return *limit == 0 ? "0 us (poll only)" : std::to_string(*limit) + " us";
}

std::string format_resume_latency(LatencyLimit limit) {
    if (!limit)
        return "0";
    if (*limit == 0)
        return "n/a";
    return std::to_string(*limit);
}

Result<LatencyLimit> parse_cpu_dma_latency(std::string_view bytes) {
    if (bytes.size() != sizeof(std::int32_t))
        return make_error("expected 4 bytes, got " + std::to_string(bytes.size()));
    std::int32_t value = 0;
    std::memcpy(&value, bytes.data(), sizeof value);
    if (value < 0)
        return make_error("negative latency " + std::to_string(value));
    if (value >= cpu_dma_latency_none)
        return LatencyLimit{};
    return LatencyLimit{static_cast<std::uint32_t>(value)};
}

Result<BlockStat> parse_block_stat(std::string_view text) {
    std::array<std::uint64_t, 32> fields{}; // a fixed array: read every tick
    size_t count = 0;
    auto t = trim(text);
    size_t pos = 0;
    while (pos < t.size() && count < fields.size()) {
        while (pos < t.size() && t[pos] == ' ')
            ++pos;
        size_t end = t.find(' ', pos);
        if (end == std::string_view::npos)
            end = t.size();
        std::uint64_t v = 0;
        if (!parse_whole(t.substr(pos, end - pos), v))
            return make_error("bad field " + in_quotes(t.substr(pos, end - pos)) +
                              " in block stat");
        fields[count++] = v;
        pos = end;
    }
    if (count < 11)
        return make_error("expected at least 11 fields in block stat, got " +
                          std::to_string(count));
    BlockStat s;
    s.read_ios = fields[0];
    s.read_ticks_ms = fields[3];
    s.write_ios = fields[4];
    s.write_ticks_ms = fields[7];
    s.in_flight = fields[8];
    s.io_ticks_ms = fields[9];
    if (count >= 15) {
        s.discard_ios = fields[11];
        s.discard_ticks_ms = fields[14];
    }
    if (count >= 17) {
        s.flush_ios = fields[15];
        s.flush_ticks_ms = fields[16];
    }
    return s;
}

Result<void> parse_stat_intr(std::string_view proc_stat, std::vector<std::uint64_t>& counts) {
    // Runs every tick on a line of thousands of numbers: no allocation once
    // `counts` has grown.
    size_t start = proc_stat.starts_with("intr ") ? 0 : proc_stat.find("\nintr ");
    if (start == std::string_view::npos)
        return make_error("no intr line");
    if (start != 0)
        ++start;
    size_t end = proc_stat.find('\n', start);
    std::string_view line =
        proc_stat.substr(start + 5, end == std::string_view::npos ? end : end - start - 5);
    counts.clear();
    bool total_skipped = false; // the first number is the sum of all
    size_t pos = 0;
    while (pos <= line.size()) {
        size_t space = line.find(' ', pos);
        if (space == std::string_view::npos)
            space = line.size();
        std::uint64_t v = 0;
        if (!parse_whole(line.substr(pos, space - pos), v))
            return make_error("bad count " + in_quotes(line.substr(pos, space - pos)) +
                              " in intr line");
        if (total_skipped)
            counts.push_back(v);
        total_skipped = true;
        pos = space + 1;
    }
    return {};
}

Result<std::uint64_t> parse_irq_per_cpu_count(std::string_view text) {
    const auto counts = trim(text);
    if (counts.empty())
        return make_error("no count");
    std::uint32_t sum = 0; // kstat_irqs_usr() sums in an unsigned int
    // Read at an onset: field by field, nothing allocated.
    size_t start = 0;
    for (;;) {
        const size_t end = std::min(counts.find(',', start), counts.size());
        const auto field = trim(counts.substr(start, end - start));
        auto count = parse_u64(field);
        if (!count || *count > UINT32_MAX)
            return make_error("bad count " + in_quotes(field));
        sum += static_cast<std::uint32_t>(*count);
        if (end == counts.size())
            return std::uint64_t{sum};
        start = end + 1;
    }
}

Result<std::uint64_t> parse_tags_busy(std::string_view text) {
    if (trim(text).empty())
        return 0; // hctx_tags_show prints nothing where hctx->tags is NULL
    for (auto line : split(text, '\n')) {
        line = trim(line);
        if (!line.starts_with("busy="))
            continue;
        auto value = parse_u64(line.substr(5));
        if (!value)
            return make_error("bad busy= line: " + value.error().message);
        return *value;
    }
    return make_error("no busy= line");
}

Result<std::uint32_t> parse_kernel_dev(std::string_view major_minor) {
    auto t = trim(major_minor);
    auto colon = t.find(':');
    if (colon == std::string_view::npos)
        return make_error("expected MAJOR:MINOR, got \"" + std::string(t) + "\"");
    auto major = parse_u64(t.substr(0, colon));
    auto minor = parse_u64(t.substr(colon + 1));
    if (!major || !minor || *major >= (1u << 12) || *minor >= (1u << 20))
        return make_error("expected MAJOR:MINOR, got \"" + std::string(t) + "\"");
    return static_cast<std::uint32_t>(*major << 20 | *minor);
}

Result<std::optional<std::string>> parse_diskstats_dev(std::string_view diskstats,
                                                       std::string_view name) {
    int number = 0;
    for (auto line : split(diskstats, '\n')) {
        ++number;
        const auto fields = words(line);
        if (fields.size() < 3 || fields[2] != name)
            continue;
        std::string dev = std::string(fields[0]) + ":" + std::string(fields[1]);
        if (auto valid = parse_kernel_dev(dev); !valid)
            return make_error("line " + std::to_string(number) + ": " + valid.error().message);
        return std::optional<std::string>(std::move(dev));
    }
    return std::optional<std::string>();
}

BlockStatDelta block_stat_delta(const BlockStat& before, const BlockStat& after) {
    const std::uint64_t ios_before = before.read_ios + before.write_ios;
    const std::uint64_t ios_after = after.read_ios + after.write_ios;
    if (ios_after < ios_before)
        return {};
    const auto ticks32 = [](std::uint64_t from, std::uint64_t to) {
        return static_cast<std::uint64_t>(static_cast<std::uint32_t>(to - from));
    };
    return {ios_after - ios_before, ticks32(before.read_ticks_ms, after.read_ticks_ms) +
                                        ticks32(before.write_ticks_ms, after.write_ticks_ms)};
}

namespace {

struct Utf8Char {
    size_t length;      // bytes
    std::uint32_t code; // the code point
};

// The well-formed UTF-8 sequence at `text[i]`, or nullopt (a stray
// continuation byte, a sequence cut short, an overlong form, a surrogate).
std::optional<Utf8Char> utf8_char_at(std::string_view text, size_t i) {
    const auto c = static_cast<unsigned char>(text[i]);
    size_t n = 0;
    std::uint32_t min = 0;
    std::uint32_t code = 0;
    if (c < 0x80)
        return Utf8Char{1, c};
    if ((c & 0xE0) == 0xC0)
        n = 2, min = 0x80, code = c & 0x1Fu;
    else if ((c & 0xF0) == 0xE0)
        n = 3, min = 0x800, code = c & 0x0Fu;
    else if ((c & 0xF8) == 0xF0)
        n = 4, min = 0x10000, code = c & 0x07u;
    else
        return std::nullopt;
    if (i + n > text.size())
        return std::nullopt;
    for (size_t k = 1; k < n; ++k) {
        const auto next = static_cast<unsigned char>(text[i + k]);
        if ((next & 0xC0) != 0x80)
            return std::nullopt;
        code = (code << 6) | (next & 0x3Fu);
    }
    if (code < min || code > 0x10FFFF || (code >= 0xD800 && code <= 0xDFFF))
        return std::nullopt;
    return Utf8Char{n, code};
}

} // namespace

std::optional<TextPosition> first_invalid_utf8(std::string_view text) {
    TextPosition at;
    size_t i = 0;
    while (i < text.size()) {
        const auto c = utf8_char_at(text, i);
        if (!c)
            return at;
        if (c->code == '\n') {
            ++at.line;
            at.column = 1;
        } else {
            ++at.column;
        }
        i += c->length;
    }
    return std::nullopt;
}

namespace {

std::string replace_controls(std::string_view text, bool keep_line_breaks) {
    std::string out;
    out.reserve(text.size());
    for (size_t i = 0; i < text.size();) {
        const auto c = utf8_char_at(text, i);
        const bool kept = keep_line_breaks && c && (c->code == '\n' || c->code == '\t');
        const bool control = c && !kept && (c->code < 0x20 || (c->code >= 0x7f && c->code <= 0x9f));
        if (!c || control) {
            out += '?';
            i += c ? c->length : 1;
        } else {
            out.append(text.substr(i, c->length));
            i += c->length;
        }
    }
    return out;
}

} // namespace

std::string terminal_safe(std::string_view text) {
    return replace_controls(text, true);
}

std::string terminal_safe_field(std::string_view text) {
    return replace_controls(text, false);
}

Result<void> check_toml_utf8(std::string_view text, const std::string& source) {
    if (auto bad = first_invalid_utf8(text))
        return make_error(source + ":" + std::to_string(bad->line) + ":" +
                          std::to_string(bad->column) + ": not UTF-8 (TOML text must be)");
    return {};
}

} // namespace latgov
