"""latgov_bench: the interleaved A/B benchmark behind bench/ab.

Modules, in the order data flows through them:
  sysstate   reading the machine (cpuidle, /proc/stat, PM QoS, IRQs) under a root
  target     the device or file under test, and the checks before writing to it
  workloads  the fio jobs in bench/jobs and what the harness does around them
  sampler    constraints held during a run (100 ms samples, latgovd status)
  fio        fio's command line and JSON output
  runner     one run: fio, latgovd, /dev/cpu_dma_latency, measurements around it
  results    results.csv columns and rows
  aggregate  medians and spreads per workload and mode (pure)
  targets    acceptance targets from targets.toml, checked on an aggregate (pure)
  report     summary.md (pure)
  meta       run-meta.json
  cli        bench/ab's command line
"""
