#include "latgov/irq_match.hpp"

#include <doctest/doctest.h>

using namespace latgov;

namespace {

// "irq/name", or "none", so a failing check prints the match.
std::string describe(const std::optional<QueueIrq>& irq) {
    return irq ? std::to_string(irq->irq) + "/" + irq->name : "none";
}

DiskIrqFacts nvme(std::string controller) {
    DiskIrqFacts facts;
    facts.kind = DeviceKind::nvme;
    facts.controller = std::move(controller);
    return facts;
}

} // namespace

TEST_CASE("NVMe hardware queue i is completed by I/O queue i+1's IRQ") {
    const IrqNames names{{"nvme0q0", 30}, {"nvme0q1", 31}, {"nvme0q2", 32}};
    CHECK(describe(match_queue_irq(names, nvme("nvme0"), 0, QueueType::default_, {0})) ==
          "31/nvme0q1");
    CHECK(describe(match_queue_irq(names, nvme("nvme0"), 1, QueueType::read, {1})) == "32/nvme0q2");
}

TEST_CASE("an NVMe controller with a single vector names its I/O queue's action too") {
    // One IRQ with the actions "nvme1q0,nvme1q1": discovery splits them.
    const IrqNames names{{"nvme1q0", 40}, {"nvme1q1", 40}};
    CHECK(describe(match_queue_irq(names, nvme("nvme1"), 0, QueueType::default_, {0, 1})) ==
          "40/nvme1q1");
}

TEST_CASE("an NVMe controller being reset (I/O IRQs freed) is not mapped to its admin IRQ") {
    const IrqNames names{{"nvme1q0", 40}};
    CHECK(describe(match_queue_irq(names, nvme("nvme1"), 0, QueueType::default_, {0, 1})) ==
          "none");
    CHECK(describe(match_queue_irq(names, nvme("nvme1"), 1, QueueType::default_, {2, 3})) ==
          "none");
}

TEST_CASE("an NVMe queue beyond the named IRQs has none (a poll queue without debugfs)") {
    const IrqNames names{{"nvme0q0", 30}, {"nvme0q1", 31}};
    CHECK(describe(match_queue_irq(names, nvme("nvme0"), 1, QueueType::default_, {1})) == "none");
}

TEST_CASE("a poll queue has no IRQ, whatever the names say") {
    const IrqNames names{{"nvme0q2", 32}};
    CHECK(describe(match_queue_irq(names, nvme("nvme0"), 1, QueueType::poll, {1})) == "none");
}

TEST_CASE("virtio-blk queue i is completed by <device>-req.<i>") {
    DiskIrqFacts facts;
    facts.kind = DeviceKind::virtio_blk;
    facts.device_link = "virtio1";
    const IrqNames names{{"virtio1-config", 24}, {"virtio1-req.0", 25}};
    CHECK(describe(match_queue_irq(names, facts, 0, QueueType::default_, {0, 1})) ==
          "25/virtio1-req.0");
}

TEST_CASE("without a naming rule the MSI IRQ whose affinity equals the submitters matches") {
    DiskIrqFacts facts;
    facts.kind = DeviceKind::other;
    facts.msi_affinities = {{50, {0}}, {51, {1}}};
    const IrqNames names{{"foo-queue1", 51}};
    CHECK(describe(match_queue_irq(names, facts, 1, QueueType::default_, {1})) == "51/foo-queue1");
    CHECK(describe(match_queue_irq(names, facts, 0, QueueType::default_, {0})) == "50/");
    CHECK(describe(match_queue_irq(names, facts, 2, QueueType::default_, {0, 1})) == "none");
}

TEST_CASE("a virtio disk without its named IRQ falls back to the affinity match") {
    DiskIrqFacts facts;
    facts.kind = DeviceKind::virtio_blk;
    facts.device_link = "virtio2";
    facts.msi_affinities = {{60, {0, 1}}};
    CHECK(describe(match_queue_irq({}, facts, 0, QueueType::default_, {0, 1})) == "60/");
}

TEST_CASE("a virtio configuration IRQ never completes a queue") {
    DiskIrqFacts facts;
    facts.kind = DeviceKind::virtio_blk;
    facts.device_link = "virtio1";
    // Both vectors on CPUs 0-1; the config one comes first by number.
    facts.msi_affinities = {{24, {0, 1}}, {25, {0, 1}}};
    const IrqNames names{{"virtio1-config", 24}, {"virtio1-virtqueues", 25}};
    CHECK(describe(match_queue_irq(names, facts, 0, QueueType::default_, {0, 1})) ==
          "25/virtio1-virtqueues");
    // With the queue's mask it is still not taken: the device's one IRQ for
    // every queue is; and alone it is no match at all.
    facts.msi_affinities = {{24, {0, 1}}};
    CHECK(describe(match_queue_irq(names, facts, 0, QueueType::default_, {0, 1})) ==
          "25/virtio1-virtqueues");
    CHECK(describe(match_queue_irq({{"virtio1-config", 24}}, facts, 0, QueueType::default_,
                                   {0, 1})) == "none");
}

TEST_CASE("a virtio disk with one IRQ for every queue is completed by it") {
    DiskIrqFacts facts;
    facts.kind = DeviceKind::virtio_blk;
    facts.device_link = "virtio1";
    // virtio-mmio, or virtio-pci on a legacy INTx line: the device's name.
    CHECK(describe(match_queue_irq({{"virtio1", 36}}, facts, 0, QueueType::default_, {0, 1})) ==
          "36/virtio1");
    CHECK(describe(match_queue_irq({{"virtio1", 36}}, facts, 1, QueueType::default_, {2, 3})) ==
          "36/virtio1");
    // One MSI-X vector for every queue, its mask not a queue's.
    facts.msi_affinities = {{24, {0, 1, 2, 3}}, {25, {0, 1, 2, 3}}};
    const IrqNames shared{{"virtio1-config", 24}, {"virtio1-virtqueues", 25}};
    CHECK(describe(match_queue_irq(shared, facts, 1, QueueType::default_, {2, 3})) ==
          "25/virtio1-virtqueues");
    // A line another device shares is not the disk's own (whatever the
    // other action's name: it may name another IRQ too), nor another
    // device's IRQ, nor a poll queue's.
    facts.msi_affinities.clear();
    facts.shared_irqs = {36};
    CHECK(describe(match_queue_irq({{"virtio1", 36}, {"PCIe PME", 24}}, facts, 0,
                                   QueueType::default_, {0, 1})) == "none");
    facts.shared_irqs.clear();
    CHECK(describe(match_queue_irq({{"virtio10", 36}}, facts, 0, QueueType::default_, {0, 1})) ==
          "none");
    CHECK(describe(match_queue_irq({{"virtio1", 36}}, facts, 0, QueueType::poll, {0, 1})) ==
          "none");
}

TEST_CASE("a request IRQ of the device wins over another IRQ with the same mask") {
    DiskIrqFacts facts;
    facts.kind = DeviceKind::other;
    facts.device_link = "virtio3";
    facts.msi_affinities = {{70, {0}}, {71, {0}}};
    const IrqNames names{{"other", 70}, {"virtio3-req.0", 71}};
    std::string warning;
    CHECK(describe(match_queue_irq(names, facts, 0, QueueType::default_, {0}, &warning)) ==
          "71/virtio3-req.0");
    CHECK(warning.empty());
}

TEST_CASE("several MSI IRQs with the queue's mask are no match, with a warning") {
    DiskIrqFacts facts;
    facts.kind = DeviceKind::other;
    facts.msi_affinities = {{50, {0, 1}}, {51, {0, 1}}};
    const IrqNames names{{"xyz-a", 50}, {"xyz-b", 51}};
    std::string warning;
    CHECK(describe(match_queue_irq(names, facts, 0, QueueType::default_, {0, 1}, &warning)) ==
          "none");
    CHECK(warning == "hardware queue 0: MSI IRQs 50 (xyz-a), 51 (xyz-b) all have the queue's "
                     "CPUs as affinity; none is taken as its own");
}
