"""What a run holds and gives back, with fake processes on a small tree:
latgovd --restore after every latgovd and the check that follows it, its
metrics file in the run, handles kept until their process has exited,
latgovd's evidence file moved aside and put back, and latgovd's settings
read with its drop-ins."""

import subprocess

import pytest

from latgov_bench import runner
from latgov_bench.runner import (EvidenceAside, Interrupted, MachineConstrained, Session,
                                 Tools, daemon_setting, evidence_file, latgovd_config_files,
                                 left_constrained, status_interval)
from latgov_bench.sysstate import SysRoot


class FakeProcess:
    """A Popen whose exit is scripted: `rc` once it has exited (None: it
    runs until signalled), `wait_raises` raised by the next wait()."""

    def __init__(self, rc=None, wait_raises=None, pid=4242):
        self.pid = pid
        self.returncode = rc
        self.signals = []
        self.wait_raises = wait_raises

    def poll(self):
        return self.returncode

    def send_signal(self, sig):
        self.signals.append(sig)

    def kill(self):
        self.signals.append("kill")
        self.returncode = -9

    def wait(self, timeout=None):
        if self.wait_raises is not None:
            e, self.wait_raises = self.wait_raises, None
            raise e
        if self.returncode is None:
            self.returncode = 0
        return self.returncode


def qos_file(root, cpu):
    return root / ("sys/devices/system/cpu/cpu%d/power/pm_qos_resume_latency_us" % cpu)


@pytest.fixture
def tree(tmp_path):
    for cpu in (0, 1):
        qos_file(tmp_path, cpu).parent.mkdir(parents=True)
        qos_file(tmp_path, cpu).write_text("0\n")
    (tmp_path / "run").mkdir()
    return tmp_path


@pytest.fixture
def restores(monkeypatch):
    """Records every command runner runs; `latgovd --restore` puts cpu1
    back to "0" unless the test says otherwise."""
    calls = []
    state = {"fixes": True}

    def run(cmd, **kw):
        calls.append(cmd)
        if state["fixes"] and state.get("root"):
            qos_file(state["root"], 1).write_text("0\n")
        return subprocess.CompletedProcess(cmd, 0, "", "")

    monkeypatch.setattr(runner.subprocess, "run", run)
    return calls, state


def session(tree, config=None):
    s = Session(SysRoot(tree), Tools("fio", "/x/latgovd", "/x/latgov", config, 0))
    s.runtime_dir = tree / "run"
    return s


def started(s, process, tree):
    """The state start_daemon leaves: latgovd running, its restore due."""
    s.daemon = process
    s.restore_due = True
    s.qos_before = {0: "0", 1: "0"}
    s.daemon_log = tree / "latgovd.log"
    s.daemon_log.write_text("latgovd ready\n")


def exited_leaving(tree, cpu, value, rc):
    """A session whose latgovd exited with `rc` and left `cpu` at `value`."""
    qos_file(tree, cpu).write_text(value + "\n")
    s = session(tree)
    started(s, FakeProcess(rc=rc), tree)
    return s


@pytest.mark.parametrize("rc", [0, 1, -11, -9])
def test_restore_runs_however_latgovd_ended(tree, restores, rc):
    calls, state = restores
    s = session(tree, config="/etc/x.toml")
    started(s, FakeProcess(rc=rc), tree)
    assert s.stop_daemon() == rc
    assert calls == [["/x/latgovd", "--restore", "--runtime-dir", str(tree / "run"),
                      "--config", "/etc/x.toml"]]
    assert s.daemon is None and not s.restore_due
    assert "--restore" in s.daemon_log.read_text()
    assert s.stop_daemon() is None and len(calls) == 1  # once per latgovd


def test_the_restore_is_logged_with_the_repository_path_of_a_latgovd_inside_it(tree, restores):
    # The daemon logs are committed with the results: no checkout's path.
    calls, _ = restores
    latgovd = str(runner.BENCH.parent / "build" / "daemon" / "latgovd")
    s = Session(SysRoot(tree), Tools("fio", latgovd, "/x/latgov", None, 0))
    s.runtime_dir = tree / "run"
    started(s, FakeProcess(), tree)
    s.stop_daemon()
    assert calls[0][0] == latgovd  # run as given
    log = s.daemon_log.read_text()
    assert "--- build/daemon/latgovd --restore --runtime-dir " in log
    assert str(runner.BENCH.parent) not in log


def test_a_running_latgovd_is_stopped_then_restored(tree, restores):
    calls, _ = restores
    s = session(tree)
    p = FakeProcess()
    started(s, p, tree)
    assert s.stop_daemon() == 0
    assert p.signals == [runner.signal.SIGTERM]
    assert calls[0][:2] == ["/x/latgovd", "--restore"] and "--config" not in calls[0]


def test_a_cpu_left_constrained_stops_the_bench_naming_it(tree, restores):
    calls, state = restores
    state["fixes"] = False
    s = exited_leaving(tree, 1, "n/a", rc=-11)  # what a crashed latgovd left
    with pytest.raises(MachineConstrained) as e:
        s.stop_daemon()
    assert "cpu1 pm_qos_resume_latency_us is n/a (0 when the run started)" in str(e.value)
    assert len(calls) == 1 and s.keep_runtime_dir
    # cleanup keeps the journal for a restore by hand, and raises nothing more
    s.cleanup()
    assert (tree / "run").exists()


def test_restore_puts_back_what_latgovd_left(tree, restores):
    _, state = restores
    state["root"] = tree
    s = exited_leaving(tree, 1, "n/a", rc=1)
    assert s.stop_daemon() == 1  # restored: no error
    assert qos_file(tree, 1).read_text() == "0\n"


def test_latgovd_is_known_until_its_wait_returns(tree, restores):
    calls, _ = restores
    s = session(tree)
    p = FakeProcess(wait_raises=Interrupted("SIGINT"))
    started(s, p, tree)
    with pytest.raises(Interrupted):
        s.stop_daemon()
    assert s.daemon is p and s.restore_due and calls == []
    s.release_all()  # as the harness does on its way out
    assert s.daemon is None and len(calls) == 1


def test_fio_is_known_until_its_wait_returns(tree, monkeypatch):
    monkeypatch.setattr(runner.os, "killpg", lambda pid, sig: None)
    s = session(tree)
    p = FakeProcess(wait_raises=Interrupted("SIGTERM"))
    s.fio = p
    with pytest.raises(Interrupted):
        s.stop_fio()
    assert s.fio is p
    s.stop_fio()
    assert s.fio is None


def test_release_all_releases_the_rest_when_a_cpu_is_left_constrained(tree, restores):
    _, state = restores
    state["fixes"] = False
    s = exited_leaving(tree, 0, "20", rc=0)
    closed = []
    s.dma_fd = 99
    s.release_dma = lambda: closed.append(True)
    with pytest.raises(MachineConstrained, match="cpu0 pm_qos_resume_latency_us is 20"):
        s.release_all()
    assert closed == [True]


def test_left_constrained():
    assert left_constrained({0: "0", 1: "0"}, {0: "0", 1: "0"}) == []
    assert left_constrained({0: "0", 1: "0"}, {0: "0", 1: "?"}) == [
        "cpu1 pm_qos_resume_latency_us is unreadable (0 when the run started)"]


# --------------------------------------------------------------------------
# latgovd's evidence file

def test_an_existing_evidence_file_is_moved_aside_and_put_back(tmp_path):
    path = tmp_path / "latgov" / "evidence"
    path.parent.mkdir()
    path.write_text("learnt before\n")
    ev = EvidenceAside.move_aside(str(path))
    assert ev.existed and not path.exists()
    assert len(ev.sha256) == 64
    path.write_text("learnt by this run\n")  # what the run's latgovds saved
    (tmp_path / "raw").mkdir()
    end = ev.record_end(tmp_path / "raw")
    assert end["existed"] and end["copy"] == "raw/evidence.end"
    assert (tmp_path / "raw" / "evidence.end").read_text() == "learnt by this run\n"
    assert ev.put_back() == ""
    assert path.read_text() == "learnt before\n"
    assert not (tmp_path / "latgov" / ("evidence" + runner.EVIDENCE_SAVED_SUFFIX)).exists()
    j = ev.to_json()
    assert j["at_start"]["existed"] and j["at_start"]["sha256"] == ev.sha256


def test_without_evidence_at_the_start_none_is_left(tmp_path):
    path = tmp_path / "latgov" / "evidence"  # its directory missing too
    ev = EvidenceAside.move_aside(str(path))
    assert not ev.existed and ev.to_json()["at_start"] == {"existed": False}
    path.parent.mkdir()
    path.write_text("learnt by this run\n")
    ev.put_back()
    assert not path.exists() and not path.parent.exists()


def test_directories_latgovd_made_for_the_file_go_with_it(tmp_path):
    path = tmp_path / "a" / "b" / "evidence"  # neither a nor b exists
    ev = EvidenceAside.move_aside(str(path))
    path.parent.mkdir(parents=True)  # as latgovd's save does
    path.write_text("learnt by this run\n")
    assert ev.put_back() == ""
    assert not (tmp_path / "a").exists() and tmp_path.exists()


def test_a_directory_someone_else_filled_stays(tmp_path):
    path = tmp_path / "a" / "b" / "evidence"
    ev = EvidenceAside.move_aside(str(path))
    path.parent.mkdir(parents=True)
    path.write_text("learnt\n")
    (tmp_path / "a" / "theirs").write_text("x")
    assert ev.put_back() == ""
    assert not (tmp_path / "a" / "b").exists() and (tmp_path / "a" / "theirs").exists()


def test_an_original_left_aside_by_an_earlier_run_is_not_overwritten(tmp_path):
    path = tmp_path / "evidence"
    path.write_text("x")
    (tmp_path / ("evidence" + runner.EVIDENCE_SAVED_SUFFIX)).write_text("original")
    with pytest.raises(runner.HarnessError, match="did not put latgovd's evidence file back"):
        EvidenceAside.move_aside(str(path))
    assert path.read_text() == "x"


def test_cleanup_puts_the_evidence_back_whatever_happens(tree, restores):
    _, state = restores
    state["fixes"] = False
    path = tree / "evidence"
    path.write_text("original")
    s = session(tree)
    s.evidence = EvidenceAside.move_aside(str(path))
    path.write_text("learnt")
    qos_file(tree, 1).write_text("n/a\n")
    started(s, FakeProcess(rc=-11), tree)
    with pytest.raises(MachineConstrained):
        s.cleanup()
    assert path.read_text() == "original"


def test_a_put_back_cut_short_is_finished_by_the_next(tmp_path, monkeypatch):
    path = tmp_path / "evidence"
    path.write_text("original")
    ev = EvidenceAside.move_aside(str(path))
    path.write_text("learnt")
    rename = runner.os.rename

    def cut(src, dst):  # a Ctrl-C after the unlink, before the rename
        raise Interrupted("SIGINT")

    monkeypatch.setattr(runner.os, "rename", cut)
    with pytest.raises(Interrupted):
        ev.put_back()
    monkeypatch.setattr(runner.os, "rename", rename)
    assert ev.put_back() == ""  # as cleanup() does on the way out
    assert path.read_text() == "original"


def test_cleanup_keeps_the_journal_while_a_restore_is_pending(tree, restores):
    calls, _ = restores
    s = session(tree)
    # latgovd's wait and then the restore are both cut (a second Ctrl-C).
    started(s, FakeProcess(wait_raises=Interrupted("SIGINT")), tree)
    runner_run = runner.subprocess.run

    def restore_cut(cmd, **kw):
        raise Interrupted("SIGINT")

    runner.subprocess.run = restore_cut
    try:
        with pytest.raises(Interrupted):
            s.cleanup()
    finally:
        runner.subprocess.run = runner_run
    assert s.restore_due and (tree / "run").exists()
    s.cleanup()  # the restore runs now, and only then the journal goes
    assert not s.restore_due and len(calls) == 1 and not (tree / "run").exists()


def test_cleanup_ignores_a_second_ctrl_c(tree, restores):
    seen = []
    s = session(tree)
    started(s, FakeProcess(rc=0), tree)
    real_release = s.release_all

    def release_and_look():
        seen.append(runner.signal.getsignal(runner.signal.SIGINT))
        real_release()

    s.release_all = release_and_look
    before = runner.signal.getsignal(runner.signal.SIGINT)
    s.cleanup()
    assert seen == [runner.signal.SIG_IGN]
    assert runner.signal.getsignal(runner.signal.SIGINT) == before


# --------------------------------------------------------------------------
# latgovd's settings, as it reads them

def write(path, text):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def test_drop_ins_override_the_main_file_in_name_order(tmp_path):
    main = tmp_path / "latgov.toml"
    write(main, '[daemon]\nevidence_file = "/a"\ncalibration_file = "/cal"\n')
    write(tmp_path / "latgov.d" / "20-b.toml", '[daemon]\nevidence_file = "/b"\n')
    write(tmp_path / "latgov.d" / "10-a.toml", '[daemon]\nevidence_file = "/ignored"\n'
          'status_interval_ms = 250\n')
    write(tmp_path / "latgov.d" / "30-c.toml.disabled", '[daemon]\nevidence_file = "/c"\n')
    assert [p.rsplit("/", 1)[1] for p in latgovd_config_files(str(main))] == \
        ["latgov.toml", "10-a.toml", "20-b.toml"]
    assert evidence_file(str(main)) == "/b"
    assert runner.calibration_file(str(main)) == "/cal"
    assert status_interval(str(main)) == 0.25


def test_drop_ins_count_when_the_default_main_file_is_missing(tmp_path, monkeypatch):
    monkeypatch.setattr(runner, "DEFAULT_CONFIG", str(tmp_path / "latgov.toml"))
    assert evidence_file(None) == runner.DEFAULT_EVIDENCE
    assert status_interval(None) == 1.0
    write(tmp_path / "latgov.d" / "local.toml", '[daemon]\nevidence_file = "/e"\n')
    assert evidence_file(None) == "/e"
    assert runner.calibration_file(None) == runner.DEFAULT_CALIBRATION


def test_an_unparsable_drop_in_is_passed_over(tmp_path):
    main = tmp_path / "latgov.toml"
    write(main, '[daemon]\nevidence_file = "/a"\n')
    write(tmp_path / "latgov.d" / "bad.toml", "[daemon\n")
    assert daemon_setting(str(main), "evidence_file", "/d") == "/a"


def test_a_latgovd_that_exits_before_ready_is_restored_too(tree, restores, monkeypatch):
    calls, _ = restores
    monkeypatch.setattr(runner.subprocess, "Popen", lambda *a, **kw: FakeProcess(rc=78))
    s = session(tree)
    with pytest.raises(runner.HarnessError, match="latgovd exited with 78 before"):
        s.start_daemon("latgov", tree / "latgovd.log", [0, 1])
    assert s.qos_before == {0: "0", 1: "0"}
    assert [c[:2] for c in calls] == [["/x/latgovd", "--restore"]]
    assert s.daemon is None and not s.restore_due


def test_latgovd_writes_its_metrics_beside_its_log(tree, restores, monkeypatch):
    started_with = []

    def popen(cmd, **kw):
        started_with.append(cmd)
        return FakeProcess(rc=78)

    monkeypatch.setattr(runner.subprocess, "Popen", popen)
    s = session(tree)
    with pytest.raises(runner.HarnessError):
        s.start_daemon("latgov", tree / "r1.latgovd.log", [0, 1])
    cmd = started_with[0]
    assert cmd[cmd.index("--metrics-file") + 1] == str(tree / "r1.latgovd.prom")


def test_latgovd_that_calibrates_on_start_gets_the_probes_time_to_be_ready(tmp_path):
    # It probes the idle costs before its first status: up to 20 s, for which
    # it extends its own start-up timeout under systemd by 60 s.
    main = tmp_path / "latgov.toml"
    write(main, "[daemon]\ncalibrate_on_start = true\n")
    assert runner.ready_within(str(main)) == runner.START_S + runner.CALIBRATE_ON_START_S
    write(main, "[daemon]\ncalibrate_on_start = false\n")
    assert runner.ready_within(str(main)) == runner.START_S


# --------------------------------------------------------------------------
# latgovd's calibration file: none at the start unless --calibrate

def test_the_calibration_file_is_moved_aside_unless_calibrate(tmp_path, monkeypatch):
    from latgov_bench import cli
    main = tmp_path / "latgov.toml"
    cal, ev = tmp_path / "cal.toml", tmp_path / "state" / "evidence"
    write(main, '[daemon]\ncalibration_file = "%s"\nevidence_file = "%s"\n' % (cal, ev))
    write(cal, "[costs]\nmeasured = 1\n")
    s = Session(SysRoot(tmp_path), Tools("fio", "/x/latgovd", "/x/latgov", str(main), 0))
    cli.move_aside(s, str(main), use_calibration=False)
    assert not cal.exists() and s.calibration.existed
    text = runner.no_calibration(s.calibration)
    assert text.startswith("none: the machine's %s (sha256 " % cal)
    assert "moved aside to %s.bench-ab-saved for the run and put back at exit" % cal in text
    s.cleanup()  # as on any exit: Ctrl-C, a failed run, the end
    assert cal.read_text() == "[costs]\nmeasured = 1\n"
    assert not (tmp_path / "cal.toml.bench-ab-saved").exists()
    # --calibrate: the user asked for the machine's file; it stays in place
    s = Session(SysRoot(tmp_path), Tools("fio", "/x/latgovd", "/x/latgov", str(main), 0))
    cli.move_aside(s, str(main), use_calibration=True)
    assert cal.exists() and s.calibration is None
    s.cleanup()


def test_without_a_calibration_file_nothing_is_made_or_removed(tmp_path):
    cal = tmp_path / "var" / "cal.toml"
    main = tmp_path / "latgov.toml"
    write(main, '[daemon]\ncalibration_file = "%s"\n' % cal)
    aside = runner.calibration_aside(str(main))
    assert not aside.existed
    assert runner.no_calibration(aside) == (
        "none: no %s, latgovd learns from live IO (--calibrate was not given)" % cal)
    write(cal, "someone else's, written meanwhile\n")
    assert aside.put_back() == "" and cal.exists()  # not this run's to remove
    assert (tmp_path / "var").exists()


def test_a_calibration_latgovd_writes_in_the_run_is_removed_at_exit(tmp_path):
    """calibrate_on_start: latgovd writes the calibration file itself, so
    one there at exit is the run's: removed where there was none, the
    machine's put back over it where there was one."""
    cal = tmp_path / "var" / "cal.toml"
    main = tmp_path / "latgov.toml"
    write(main, '[daemon]\ncalibration_file = "%s"\ncalibrate_on_start = true\n' % cal)
    aside = runner.calibration_aside(str(main))
    assert not aside.existed and aside.remove_new
    assert runner.no_calibration(aside) == (
        "measured by the run's first latgovd (calibrate_on_start) into %s, which the later "
        "ones read; removed at exit (--calibrate was not given)" % cal)
    write(cal, "written by latgovd at its start\n")
    assert runner.put_calibration_back(aside) == (
        "removed what latgovd wrote in the run (calibrate_on_start); there was none at the "
        "start")
    assert not cal.exists() and not (tmp_path / "var").exists()
    write(cal, "the machine's\n")
    aside = runner.calibration_aside(str(main))
    assert aside.existed and not cal.exists()
    write(cal, "written by latgovd at its start\n")
    assert runner.put_calibration_back(aside) == "the original put back"
    assert cal.read_text() == "the machine's\n"
    # Without calibrate_on_start a file that appeared is not the run's.
    write(main, '[daemon]\ncalibration_file = "%s"\n' % cal)
    cal.unlink()
    aside = runner.calibration_aside(str(main))
    write(cal, "someone else's\n")
    assert runner.put_calibration_back(aside) == "there was none" and cal.exists()


def test_the_report_names_the_drop_ins_latgovd_reads(tmp_path, monkeypatch):
    monkeypatch.setattr(runner, "DEFAULT_CONFIG", str(tmp_path / "latgov.toml"))
    assert runner.config_description(None) == \
        "embedded default (no %s)" % (tmp_path / "latgov.toml")
    write(tmp_path / "latgov.d" / "50-site.toml", "[daemon]\n")
    write(tmp_path / "latgov.d" / "10-a.toml", "[daemon]\n")
    assert runner.config_description(None) == (
        "embedded default (no %s) with drop-ins %s, %s" % (
            tmp_path / "latgov.toml", tmp_path / "latgov.d" / "10-a.toml",
            tmp_path / "latgov.d" / "50-site.toml"))
    write(tmp_path / "latgov.toml", "[daemon]\n")
    assert runner.config_description(None).startswith(
        "%s with drop-ins %s" % (tmp_path / "latgov.toml", tmp_path / "latgov.d" / "10-a.toml"))
    other = tmp_path / "etc2" / "x.toml"
    write(other, "[daemon]\n")
    assert runner.config_description(str(other)) == str(other)
