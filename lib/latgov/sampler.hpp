// The per-tick observation of IO. Files are opened once and re-read with
// pread, so a tick costs a few reads and no path walks.
#pragma once

#include "latgov/fd.hpp"
#include "latgov/parse.hpp"
#include "latgov/result.hpp"
#include "latgov/sysroot.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace latgov {

// A file re-read from offset 0 each time.
class PreadFile {
  public:
    static Result<PreadFile> open(const SysRoot& root, const std::string& abs);
    // The whole content, in a buffer owned by the file (valid until the next read).
    Result<std::string_view> read();
    const std::string& path() const { return path_; }

  private:
    PreadFile(Fd fd, std::string path) : fd_(std::move(fd)), path_(std::move(path)) {}
    Fd fd_;
    std::string path_;
    std::string buffer_;
};

struct IoSample {
    std::vector<std::uint64_t> irq_counts; // indexed by IRQ number
    std::vector<BlockStat> devices;        // parallel to the sampler's device list
    // Requests in flight per hardware queue (debugfs hctxN/tags busy=),
    // parallel to the sampler's queue list; empty when not read.
    std::vector<std::uint64_t> queue_busy;
    // Per-CPU iowait (USER_HZ ticks) from the same read of /proc/stat,
    // indexed by CPU: where tasks sleep waiting for IO.
    std::vector<std::uint64_t> cpu_iowait;
    // Per-CPU requests issued to the governed disks (IssueCounters), indexed
    // by CPU; empty where perf events are not available.
    std::vector<std::uint64_t> cpu_issues;
};

// A hardware queue whose debugfs tags file is read every tick.
struct QueueTags {
    std::string disk;
    int hctx = 0;
};

class IoSampler {
  public:
    // `devices`: disk names whose /sys/block/<d>/stat is read every tick;
    // `queues`: hardware queues whose debugfs tags are read too (each read
    // takes the queue's mutex in the kernel: opt-in).
    static Result<IoSampler> open(const SysRoot& root, const std::vector<std::string>& devices,
                                  const std::vector<QueueTags>& queues = {});
    // Fails when a file cannot be read any more (a device went away): the
    // caller rescans the topology.
    Result<void> sample(IoSample& out);

  private:
    IoSampler(PreadFile proc_stat, std::vector<PreadFile> device_stats,
              std::vector<PreadFile> queue_tags)
        : proc_stat_(std::move(proc_stat)), device_stats_(std::move(device_stats)),
          queue_tags_(std::move(queue_tags)) {}
    PreadFile proc_stat_;
    std::vector<PreadFile> device_stats_;
    std::vector<PreadFile> queue_tags_;
};

} // namespace latgov
