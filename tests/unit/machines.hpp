// Machines of the unit tests, built by hand as Topology structs.
#pragma once

#include "latgov/topology.hpp"

#include <string>

namespace latgov {

// A vda-like disk on 2 CPUs: one queue that every CPU submits to, its IRQ
// (36) completing on CPU 1, under any cpuidle driver and governor; driver
// "none" has no idle states.
inline Topology virtio_machine(std::string driver = "intel_idle", std::string governor = "menu") {
    Topology t;
    t.online_cpus = {0, 1};
    t.cpuidle_driver = driver;
    t.cpuidle_governor = governor;
    for (int id : {0, 1}) {
        Cpu cpu;
        cpu.id = id;
        if (driver != "none")
            cpu.idle_states = {{0, "POLL", 0, 0, false}, {1, "C1", 1, 1, false}};
        t.cpus.push_back(cpu);
    }
    BlockDevice vda;
    vda.name = "vda";
    vda.dev = "253:0";
    vda.kind = DeviceKind::virtio_blk;
    vda.transport = "virtio";
    HardwareQueue q;
    q.index = 0;
    q.irq = 36;
    q.irq_name = "virtio1-req.0";
    q.completion_cpus = {1};
    q.submit_cpus = {0, 1};
    q.completion_source = CompletionSource::irq_effective_affinity;
    vda.queues = {q};
    t.devices.push_back(vda);
    return t;
}

// loop0 on CPUs 0 and 1: one queue without an IRQ, completed on its
// submitters.
inline BlockDevice loop_device() {
    BlockDevice loop;
    loop.name = "loop0";
    loop.dev = "7:0";
    HardwareQueue q;
    q.submit_cpus = q.completion_cpus = {0, 1};
    q.completion_source = CompletionSource::submit_cpus;
    loop.queues = {q};
    return loop;
}

} // namespace latgov
