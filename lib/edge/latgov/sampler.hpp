// The per-tick observation of IO. Files are opened once and re-read with
// pread, so a tick costs a few reads and no path walks.
#pragma once

#include "latgov/fd.hpp"
#include "latgov/parse.hpp"
#include "latgov/result.hpp"
#include "latgov/sample.hpp"
#include "latgov/sysroot.hpp"

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
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
    PreadFile(Fd fd, std::string path, std::size_t cap)
        : fd_(std::move(fd)), path_(std::move(path)), cap_(cap) {}
    Fd fd_;
    std::string path_;
    std::size_t cap_; // read_cap() of the file
    std::string buffer_;
};

class IoSampler {
  public:
    // `devices`: disk names whose /sys/block/<d>/stat is read every tick;
    // `queues`: hardware queues whose debugfs tags are read too (each read
    // takes the queue's mutex in the kernel: opt-in). A device whose stat
    // cannot be opened is left out, not the others with it: its slot of
    // every sample stays zero (no IO seen) and warnings() says which.
    static Result<IoSampler> open(const SysRoot& root, const std::vector<std::string>& devices,
                                  const std::vector<QueueTags>& queues = {});
    // Fails when a file cannot be read any more (a device went away): the
    // caller rescans the topology.
    Result<void> sample(IoSample& out);
    // One line per device left out at open(), for the caller to log once.
    const std::vector<std::string>& warnings() const { return warnings_; }
    // Devices left out at open() whose stat file has not opened since.
    bool leaves_out() const;
    // Opens what it can of those (a disk whose stat was not there yet when
    // the map was made); the slots of the devices it opened. They jump from
    // zero to the counts since boot at the next sample, which is no IO of
    // one tick: the caller starts their deltas again from there.
    std::vector<std::size_t> reopen_left_out(const SysRoot& root);
    // The devices asked for at open(), by slot.
    const std::vector<std::string>& devices() const { return devices_; }
    // One device's stat alone (an onset's baseline): fails for a slot left
    // out, or a file that cannot be read any more.
    Result<BlockStat> read_device(std::size_t slot);

  private:
    IoSampler(PreadFile proc_stat, std::vector<std::string> devices,
              std::vector<std::optional<PreadFile>> device_stats, std::vector<PreadFile> queue_tags,
              std::vector<std::string> warnings)
        : proc_stat_(std::move(proc_stat)), devices_(std::move(devices)),
          device_stats_(std::move(device_stats)), queue_tags_(std::move(queue_tags)),
          warnings_(std::move(warnings)) {}
    PreadFile proc_stat_;
    std::vector<std::string> devices_;                   // by slot
    std::vector<std::optional<PreadFile>> device_stats_; // nullopt: left out
    std::vector<PreadFile> queue_tags_;
    std::vector<std::string> warnings_;
};

// Single IRQs' counts, each from /sys/kernel/irq/<n>/per_cpu_count: a few
// bytes per CPU, where /proc/stat holds every IRQ and CPU of the machine.
// For an onset's baseline, read on the CPU whose request is waited for.
class IrqCounts {
  public:
    // An IRQ whose file cannot be opened (a kernel without sparse IRQs has
    // no /sys/kernel/irq) is left out: read() gives nullopt for it, and
    // warnings() says which, for the caller to log once.
    static IrqCounts open(const SysRoot& root, const std::vector<int>& irqs);
    // Its count, 32 bits wide as /proc/stat shows it; nullopt where it is
    // left out, or its file fails (the next sample of /proc/stat says more).
    std::optional<std::uint64_t> read(int irq);
    const std::vector<std::string>& warnings() const { return warnings_; }

  private:
    std::map<int, PreadFile> files_;
    std::vector<std::string> warnings_;
};

} // namespace latgov
