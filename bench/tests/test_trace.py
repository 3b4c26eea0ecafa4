import re

from latgov_bench import trace

IRQ = re.compile(r"name=virtio\d+-req")

# Two reads by fio from a trace of this machine (trimmed): the first is
# complete, the second never completed within the trace.
TEXT = """\
             fio-13008   [000] .N... 77533.607935: block_rq_issue: 254,0 RS 4096 () 36352568 + 8 be,0,4 [fio]
         latgovd-13000   [001] d..2. 77533.607987: sched_switch: prev_comm=latgovd prev_pid=13000 prev_prio=120 prev_state=S ==> next_comm=swapper/1 next_pid=0 next_prio=120
             fio-13008   [000] dN.4. 77533.608014: sched_wakeup: comm=kworker/0:1H pid=44 prio=100 target_cpu=000
          <idle>-0       [001] d.h1. 77533.608314: irq_handler_entry: irq=36 name=virtio1-req.0
          <idle>-0       [001] ..s1. 77533.608321: block_rq_complete: 254,0 RS () 36352568 + 8 be,0,4 [0]
          <idle>-0       [000] dN.2. 77533.608326: sched_wakeup: comm=fio pid=13008 prio=120 target_cpu=000
             fio-13008   [000] ..... 77533.628405: block_rq_issue: 254,0 RS 4096 () 37586664 + 8 be,0,4 [fio]
          <idle>-0       [001] d.h1. 77533.628650: irq_handler_entry: irq=36 name=virtio1-req.0
"""


def test_a_read_is_timed_from_issue_to_interrupt_completion_and_wake_up():
    events = trace.parse(TEXT)
    assert len(events) == 8
    t = trace.read_times(events, "fio", IRQ)
    assert len(t.wake) == 1  # the second read never completed
    assert round(t.irq[0]) == 379
    assert round(t.complete[0]) == 386
    assert round(t.wake[0]) == 391
    assert round(t.woken_after_complete()[0]) == 5


def test_other_tasks_and_their_wake_ups_are_not_the_reader():
    events = trace.parse(TEXT.replace("comm=fio pid", "comm=fio2 pid"))
    assert trace.read_times(events, "fio", IRQ).wake == []


def test_summary_gives_p50_and_p90_per_part():
    t = trace.ReadTimes(irq=[100.0, 200.0, 300.0], complete=[110.0, 210.0, 310.0],
                        wake=[120.0, 230.0, 330.0])
    s = trace.summary(t)
    assert s["reads"] == 3
    assert s["issue_to_irq_p50"] == 200.0
    assert s["issue_to_irq_p90"] == 300.0
    assert s["complete_to_wake_p50"] == 20.0
    assert "issue_to_irq_p50" not in trace.summary(trace.ReadTimes())
