#include "latgov/sampler.hpp"

#include "latgov/waiters.hpp"

#include <algorithm>
#include <cerrno>
#include <fcntl.h>
#include <unistd.h>

namespace latgov {

namespace {

std::string stat_path(const std::string& device) {
    return "/sys/block/" + device + "/stat";
}

} // namespace

Result<PreadFile> PreadFile::open(const SysRoot& root, const std::string& abs) {
    auto fd = root.open(abs, O_RDONLY | O_CLOEXEC);
    if (!fd)
        return fd.error();
    return PreadFile(std::move(*fd), root.resolve(abs).string(), read_cap(abs));
}

Result<std::string_view> PreadFile::read() {
    if (buffer_.size() < 4096)
        buffer_.resize(4096);
    size_t total = 0;
    for (;;) {
        ssize_t n = ::pread(fd_.get(), buffer_.data() + total, buffer_.size() - total,
                            static_cast<off_t>(total));
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return make_error("Failed to read " + path_ + ": " + errno_message(errno));
        }
        total += static_cast<size_t>(n);
        if (total > cap_)
            return make_error("Failed to read " + path_ + ": larger than " + std::to_string(cap_) +
                              " bytes");
        if (n == 0 || total < buffer_.size())
            break;
        // /proc/stat grows with IRQs and CPUs; one byte past the cap tells
        // a file at the cap from a larger one.
        buffer_.resize(std::min(buffer_.size() * 2, cap_ + 1));
    }
    return std::string_view(buffer_.data(), total);
}

Result<IoSampler> IoSampler::open(const SysRoot& root, const std::vector<std::string>& devices,
                                  const std::vector<QueueTags>& queues) {
    auto proc_stat = PreadFile::open(root, "/proc/stat");
    if (!proc_stat)
        return proc_stat.error();
    std::vector<std::optional<PreadFile>> stats;
    std::vector<std::string> warnings;
    for (const auto& name : devices) {
        auto file = PreadFile::open(root, stat_path(name));
        if (!file) {
            warnings.push_back(file.error().message + "; the IO of " + name + " is not seen");
            stats.emplace_back();
            continue;
        }
        stats.push_back(std::move(*file));
    }
    std::vector<PreadFile> tags;
    for (const auto& q : queues) {
        auto file = PreadFile::open(root, "/sys/kernel/debug/block/" + q.disk + "/hctx" +
                                              std::to_string(q.hctx) + "/tags");
        if (!file)
            return file.error();
        tags.push_back(std::move(*file));
    }
    return IoSampler(std::move(*proc_stat), devices, std::move(stats), std::move(tags),
                     std::move(warnings));
}

bool IoSampler::leaves_out() const {
    return std::any_of(device_stats_.begin(), device_stats_.end(),
                       [](const auto& file) { return !file; });
}

std::vector<std::size_t> IoSampler::reopen_left_out(const SysRoot& root) {
    std::vector<std::size_t> opened;
    for (size_t i = 0; i < device_stats_.size(); ++i) {
        if (device_stats_[i])
            continue;
        if (auto file = PreadFile::open(root, stat_path(devices_[i]))) {
            device_stats_[i] = std::move(*file);
            opened.push_back(i);
        }
    }
    return opened;
}

Result<BlockStat> IoSampler::read_device(std::size_t slot) {
    if (slot >= device_stats_.size() || !device_stats_[slot])
        return make_error("no statistics of device slot " + std::to_string(slot));
    auto& file = *device_stats_[slot];
    auto text = file.read();
    if (!text)
        return text.error();
    auto stat = parse_block_stat(*text);
    if (!stat)
        return make_error("Failed to parse " + file.path() + ": " + stat.error().message);
    return *stat;
}

IrqCounts IrqCounts::open(const SysRoot& root, const std::vector<int>& irqs) {
    IrqCounts counts;
    for (int irq : irqs) {
        if (counts.files_.count(irq))
            continue;
        auto file =
            PreadFile::open(root, "/sys/kernel/irq/" + std::to_string(irq) + "/per_cpu_count");
        if (!file) {
            counts.warnings_.push_back(file.error().message);
            continue;
        }
        counts.files_.emplace(irq, std::move(*file));
    }
    return counts;
}

std::optional<std::uint64_t> IrqCounts::read(int irq) {
    const auto file = files_.find(irq);
    if (file == files_.end())
        return std::nullopt;
    auto text = file->second.read();
    if (!text)
        return std::nullopt;
    auto count = parse_irq_per_cpu_count(*text);
    if (!count)
        return std::nullopt;
    return *count;
}

Result<void> IoSampler::sample(IoSample& out) {
    auto text = proc_stat_.read();
    if (!text)
        return text.error();
    if (auto parsed = parse_stat_intr(*text, out.irq_counts); !parsed)
        return make_error("Failed to parse " + proc_stat_.path() + ": " + parsed.error().message);
    if (auto parsed = parse_stat_cpu_iowait(*text, out.cpu_iowait); !parsed)
        return make_error("Failed to parse " + proc_stat_.path() + ": " + parsed.error().message);
    out.devices.resize(device_stats_.size());
    for (size_t i = 0; i < device_stats_.size(); ++i) {
        if (!device_stats_[i]) {
            out.devices[i] = BlockStat{};
            continue;
        }
        auto stat_text = device_stats_[i]->read();
        if (!stat_text)
            return stat_text.error();
        auto stat = parse_block_stat(*stat_text);
        if (!stat)
            return make_error("Failed to parse " + device_stats_[i]->path() + ": " +
                              stat.error().message);
        out.devices[i] = *stat;
    }
    out.queue_busy.resize(queue_tags_.size());
    for (size_t i = 0; i < queue_tags_.size(); ++i) {
        auto tags = queue_tags_[i].read();
        if (!tags)
            return tags.error();
        auto busy = parse_tags_busy(*tags);
        if (!busy)
            return make_error("Failed to parse " + queue_tags_[i].path() + ": " +
                              busy.error().message);
        out.queue_busy[i] = *busy;
    }
    return {};
}

} // namespace latgov
