"""`patchkit attach --ray ADDRESS --match TEXT`: the --match session on every node of a Ray cluster.

On a real one-node cluster (every node of a cluster on one machine would see the same processes) with a real CPU
training job started without patchkit: exactly the asked steps recorded and the job's own code back, Ctrl-C on the
driver making the node's session detach, and a node where nothing matched.  Against a stand-in for Ray: one task
pinned to each node, answers said as they come, Ctrl-C cancelling the tasks without force and waiting for their
answers, a task that failed, and a node's answer read as untrusted.  The command line's usage errors and exit
status, given what the nodes answered.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from types import ModuleType, SimpleNamespace

import pytest
from click.testing import CliRunner

import attach_helpers as helpers
from attach_helpers import Job, attach, recording, wait_for
from patchkit.cli.commands import main
from patchkit.cluster import attach as on_nodes

A, B = "a" * 56, "b" * 56
NODES = {A: "10.0.0.1", B: "10.0.0.2"}
CANNOT_TRACE = helpers.gdb_missing() or helpers.ptrace_denied()


# ---------------------------------------------------------------- a real cluster, a real job


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    from raycluster import one_node

    home = tmp_path_factory.mktemp("node-home")
    with one_node({"PATCHKIT_HOME": str(home)}) as address:
        yield address, home


@pytest.fixture
def job(tmp_path):
    site = helpers.site(tmp_path)
    started = Job(tmp_path, site, steps=100000)
    yield started, site
    started.kill()




@pytest.mark.skipif(bool(CANNOT_TRACE), reason=CANNOT_TRACE or "")
def test_every_node_records_exactly_the_asked_steps_and_gives_the_job_its_code_back(cluster, job, tmp_path):
    address, home = cluster
    j, site = job
    j.wait_steps(10)
    done = attach(tmp_path, ["--ray", address, "--match", j.log, helpers.recipe(tmp_path, "logged"), "--root", site,
                             "--steps", 3, "--json"])
    assert done.returncode == 0, done.stderr
    (node,) = json.loads(done.stdout)
    assert node["ok"] and node["state"] == "recorded" and node["home"] == str(home)
    (proc,) = node["processes"]
    assert (proc["pid"], proc["state"], proc["original_code"], proc["why"]) == (j.pid, "restored", True,
                                                                              "the window closed")
    (capture,) = proc["captures"]
    assert capture["recorded"] == [[0, 2]]
    (trace,) = capture["traces"]
    spans = helpers.recorded_labels(trace)
    assert [k for k, _ in spans] == [0, 1, 2] and all(len(labels) == 1 for _, labels in spans)
    assert f"{node['node']}  recorded: 1 process(es) recorded, the jobs' own code is back" in done.stderr
    assert "passed over" not in done.stderr  # the driver's own command line holds TEXT too: never a candidate
    assert f"{node['node']}  pid {j.pid}: steps 0-2 recorded -> {trace}" in done.stderr
    assert "1 of 1 node(s) recorded 3 step(s) in 1 process(es)" in done.stderr
    assert str(Path(trace).parent) in (home / "captures").read_text()  # the node's own index: traces --ray finds it
    final, _ = j.finish()
    assert all(final["original"].values()) and final["left"] == []
    assert not list((home / "attached").glob("*.json"))  # nothing left attached on the node


@pytest.mark.skipif(bool(CANNOT_TRACE), reason=CANNOT_TRACE or "")
def test_ctrl_c_on_the_driver_makes_every_node_s_session_detach(cluster, job, tmp_path):
    address, home = cluster
    j, site = job
    j.wait_steps(10)
    cmd = [sys.executable, "-m", "patchkit", "attach", "--ray", address, "--match", str(j.log),
           str(helpers.recipe(tmp_path, "logged")), "--root", str(site), "--steps", "1000", "--json"]
    driver = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path,
                              env=dict(os.environ, PYTHONPATH=str(helpers.REPO)))
    wait_for(lambda: recording(home), 120, driver)
    driver.send_signal(signal.SIGINT)
    out, err = driver.communicate(timeout=180)
    assert driver.returncode == 130, err
    assert "interrupted: asking 1 node(s) to put the jobs' own code back" in err
    (node,) = json.loads(out)
    assert node["state"] == "detached"
    (proc,) = node["processes"]
    assert (proc["state"], proc["why"], proc["original_code"]) == ("restored", "detached", True)
    (first, last), = proc["captures"][0]["recorded"]
    assert first == 0 and last < 999  # part of the window, flushed at the job's next step
    final, _ = j.finish()
    assert all(final["original"].values()) and final["left"] == []
    assert not list((home / "attached").glob("*.json"))


def test_a_node_where_nothing_matched_says_so_and_fails_the_command(cluster, tmp_path):
    address, _home = cluster
    recipe = helpers.recipe(tmp_path, "logged")
    for extra in ([], ["--skip-empty"]):  # passed over, but then no node attached anything at all
        done = attach(tmp_path, ["--ray", address, "--match", "no-process-has-this-0x5eed", recipe, *extra])
        assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
        assert "nothing matched: no process (any user's) has 'no-process-has-this-0x5eed' in its command line" \
            in done.stderr
        assert "0 of 1 node(s) recorded" in done.stderr
    assert "pass --skip-empty" in attach(tmp_path, ["--ray", address, "--match", "no-process-has-this-0x5eed",
                                                    recipe]).stderr


# ---------------------------------------------------------------- a stand-in for Ray


class Ref:
    def __init__(self, node, value):
        self.node, self.value, self.cancelled = node, value, None


class FakeRay(ModuleType):
    """Just what attach_every_node calls.  ``answers[node]``: what its task returns (or raises); ``order``: the
    nodes in the order they answer; ``interrupts``: how many of the first waits meet Ctrl-C; a cancelled task
    answers ``on_cancel`` (what Ray gives back when the task caught its KeyboardInterrupt and returned)."""

    def __init__(self, answers, order=(A, B), interrupts=0, on_cancel=None):
        super().__init__("ray")
        self.answers, self.order, self.interrupts, self.on_cancel = answers, list(order), interrupts, on_cancel
        self.tasks, self.cancels = [], []
        self.util = SimpleNamespace(scheduling_strategies=SimpleNamespace(NodeAffinitySchedulingStrategy=Strategy))

    def is_initialized(self):
        return True

    def nodes(self):
        return [{"NodeID": n, "NodeManagerAddress": ip, "Alive": True} for n, ip in NODES.items()]

    def remote(self, fn):
        assert fn is on_nodes._here
        return SimpleNamespace(options=lambda **options: SimpleNamespace(remote=lambda job: self._run(options, job)))

    def _run(self, options, job):
        node = options["scheduling_strategy"].node_id
        self.tasks.append((node, options, job))
        return Ref(node, self.answers[node])

    def wait(self, refs, num_returns, timeout):
        if self.interrupts:
            self.interrupts -= 1
            raise KeyboardInterrupt
        ready = sorted(refs, key=lambda r: self.order.index(r.node))[:num_returns]
        return ready, [r for r in refs if r not in ready]

    def get(self, ref, timeout=None):
        value = ref.value if ref.cancelled is None or self.on_cancel is None else self.on_cancel(ref.node)
        if isinstance(value, BaseException):
            raise value
        return value

    def cancel(self, ref, force, recursive):
        ref.cancelled = (force, recursive)
        self.cancels.append((ref.node, force, recursive))


class Strategy:
    def __init__(self, node_id, soft):
        self.node_id, self.soft = node_id, soft


@pytest.fixture
def use(monkeypatch):
    def install(answers, **kwargs):
        ray = FakeRay(answers, **kwargs)
        monkeypatch.setitem(sys.modules, "ray", ray)
        monkeypatch.setitem(sys.modules, "ray.util", ray.util)
        monkeypatch.setitem(sys.modules, "ray.util.scheduling_strategies", ray.util.scheduling_strategies)
        return ray

    return install


def restored(pid, *spans, **more):
    return {"pid": pid, "state": "restored", "passed_over": False, "original_code": True, "why": "the window closed",
            "captures": [{"recorded": [list(s) for s in spans], "traces": [f"/t/{pid}.pt.trace.json"], "error": ""}],
            **more}


def answer(state, *processes, message=""):
    return {"node_id": "what the node says", "state": state, "message": message, "home": "/h",
            "processes": list(processes)}


def test_one_task_pinned_to_each_node_without_retry_and_each_answer_told_as_it_comes(use, tmp_path, monkeypatch):
    ray = use({A: answer(on_nodes.RECORDED, restored(11, (0, 2))), B: answer(on_nodes.NOTHING_MATCHED)},
              order=(B, A))
    monkeypatch.chdir(tmp_path)
    job = on_nodes.job_for("main_ppo", "my.yaml", ["profiler.ranks=[0]"], None, "site", (False, None), 3, 60)
    told, started = [], []
    results, interrupted = on_nodes.attach_every_node("auto", job, started.append, told.append)
    assert started == [2] and not interrupted
    assert [r.node_id for r in told] == [B, A] and [r.node_id for r in results] == [A, B]  # as they come; in order
    for (node, options, sent), expected in zip(ray.tasks, (A, B)):
        assert node == expected and sent is job
        assert (options["num_cpus"], options["max_retries"], options["scheduling_strategy"].soft) == (0, 0, False)
        assert options["name"] == "patchkit attach"  # as `ray list tasks` shows it
    assert (job["recipe"], job["root"], job["steps"], job["driver"]) == (str(tmp_path / "my.yaml"),
                                                                        str(tmp_path / "site"), 3, os.getpid())
    a, b = results
    assert (a.ok, a.attached[0]["captures"][0]["recorded"], a.node_id) == (True, [[0, 2]], A)  # the driver's id
    assert (b.ok, b.state) == (False, "nothing matched")


def test_ctrl_c_cancels_every_running_task_without_force_and_waits_for_its_answer(use):
    detached = answer(on_nodes.DETACHED, restored(11, (0, 4), why="detached"))
    ray = use({A: None, B: None}, interrupts=1, on_cancel=lambda node: detached)
    asked = []
    results, interrupted = on_nodes.attach_every_node("auto", on_nodes.job_for("x", "r", [], None, None),
                                                      on_interrupt=asked.append)
    assert interrupted and asked == [2]
    assert ray.cancels == [(A, False, False), (B, False, False)]  # KeyboardInterrupt in each task: it detaches
    assert [(r.state, r.attached[0]["why"]) for r in results] == [("detached", "detached")] * 2


def test_a_second_ctrl_c_stops_waiting_and_says_what_each_job_does_on_its_own(use):
    use({A: None, B: None}, interrupts=2)
    results, interrupted = on_nodes.attach_every_node("auto", on_nodes.job_for("x", "r", [], None, None))
    assert interrupted and [r.state for r in results] == ["no answer"] * 2
    assert "each job puts its own code back at its next step" in results[0].message


def test_a_task_that_could_not_run_or_was_cancelled_before_it_answered(use):
    TaskCancelledError = type("TaskCancelledError", (Exception,), {})
    use({A: RuntimeError("ModuleNotFoundError: No module named 'patchkit'"), B: TaskCancelledError("cancelled")})
    a, b = on_nodes.attach_every_node("auto", on_nodes.job_for("x", "r", [], None, None))[0]
    assert a.state == "failed" and "patchkit is not installed in this node's environment" in a.message
    assert b.state == "detached" and "attach --status PID" in b.message


@pytest.mark.parametrize("data,says", [
    ("not a dict", "the node answered with str"),
    ({"state": "\x1b[31mrecorded"}, "the node answered with '\\x1b[31mrecorded'"),
    ({"processes": []}, "the node answered with None"),
])
def test_an_answer_that_is_not_one_fails_that_node(data, says):
    r = on_nodes.checked(data, {"node_id": A, "ip": "10.0.0.1"})
    assert (r.state, r.ok) == ("failed", False) and says in r.message


def test_a_node_s_answer_keeps_only_known_fields_of_their_types_bounded():
    junk = [{"pid": "12"}, "x", {"pid": True}, dict(restored(13, (0, 1)), captures=[
        {"recorded": [[0, 1], [2], ["a", 3], "x"], "traces": ["/t/a", 5], "error": None}, "x"],
        targets="not a list", original_code="yes", attached_at="now", extra="dropped", command="c" * 10000)]
    r = on_nodes.checked(answer(on_nodes.RECORDED, *junk, message="m" * 100000), {"node_id": A, "ip": "10.0.0.1"})
    (p,) = r.processes
    assert p["pid"] == 13 and p["captures"] == [{"recorded": [[0, 1]], "traces": ["/t/a"], "error": ""}]
    assert (p["targets"], p["original_code"], p["attached_at"], "extra" in p) == ([], None, None, False)
    assert len(p["command"]) == on_nodes.TEXT and len(r.message) == on_nodes.LONG and r.node_id == A
    assert not r.ok  # that the job's own code is back is not said: not counted as back


def test_a_node_is_ok_when_it_attached_a_process_and_each_it_attached_is_back():
    def node(state, *procs):
        return on_nodes.checked(answer(state, *procs), {"node_id": A, "ip": "10.0.0.1"})

    launcher = {"pid": 9, "state": "refused", "passed_over": True, "error": "has not imported"}
    assert node(on_nodes.RECORDED, restored(11, (0, 1)), launcher).ok
    assert not node(on_nodes.NOTHING_TO_ATTACH, launcher).ok
    assert not node(on_nodes.RECORDED, restored(11, (0, 1)), dict(restored(12), original_code=False)).ok
    assert not node(on_nodes.INCOMPLETE, restored(11, (0, 1)), {"pid": 12, "state": "gone"}).ok


# ---------------------------------------------------------------- the command line, given what the nodes answered


@pytest.mark.parametrize("args,says", [
    (["--ray", "auto", "--match", "x", "4242", "r"], "a process id names a process of one node"),
    (["--ray", "auto", "--pids", "1,2", "r"], "a process id names a process of one node"),
    (["--ray", "auto", "r"], "--ray needs --match TEXT"),
    (["--ray", "auto", "--status", "4242"], "run `patchkit attach --status PID` on the node"),
    (["--match", "x", "--skip-empty", "r"], "--skip-empty is for --ray"),
])
def test_usage_errors_say_why_and_ask_no_node(monkeypatch, args, says):
    monkeypatch.setattr(on_nodes, "attach_every_node", lambda *a, **k: pytest.fail("a node was asked"))
    result = CliRunner().invoke(main, ["attach", *args])
    assert result.exit_code == 2 and says in result.output, result.output


def test_a_bad_setting_fails_before_any_node_is_asked(monkeypatch):
    monkeypatch.setattr(on_nodes, "attach_every_node", lambda *a, **k: pytest.fail("a node was asked"))
    result = CliRunner().invoke(main, ["attach", "--ray", "auto", "--match", "x", "verl-fsdp-update",
                                       "schedule.wait=1"])
    assert result.exit_code == 1 and "a schedule of your own does not apply" in result.output


def nodes_answer(monkeypatch, *states, interrupted=False):
    procs = {on_nodes.RECORDED: [restored(11, (0, 1))], on_nodes.INCOMPLETE: [{"pid": 12, "state": "gone"}]}
    results = [on_nodes.checked(answer(s, *procs.get(s, []), message=f"said by {s}"),
                                {"node_id": n, "ip": NODES[n]}) for n, s in zip((A, B), states)]

    def fake(address, job, on_start=None, on_result=None, on_interrupt=None):
        on_start(len(results))
        for r in results:
            on_result(r)
        return results, interrupted

    monkeypatch.setattr(on_nodes, "attach_every_node", fake)


@pytest.mark.parametrize("states,extra,code", [
    ((on_nodes.RECORDED, on_nodes.RECORDED), [], 0),
    ((on_nodes.RECORDED, on_nodes.NOTHING_MATCHED), [], 1),
    ((on_nodes.RECORDED, on_nodes.NOTHING_MATCHED), ["--skip-empty"], 0),
    ((on_nodes.RECORDED, on_nodes.NOTHING_TO_ATTACH), ["--skip-empty"], 0),
    ((on_nodes.NOTHING_MATCHED, on_nodes.NOTHING_MATCHED), ["--skip-empty"], 1),
    ((on_nodes.RECORDED, on_nodes.INCOMPLETE), ["--skip-empty"], 1),
    ((on_nodes.RECORDED, on_nodes.REFUSED), [], 1),
])
def test_exit_0_only_when_every_node_attached_and_each_process_is_back(monkeypatch, states, extra, code):
    nodes_answer(monkeypatch, *states)
    result = CliRunner().invoke(main, ["attach", "--ray", "auto", "--match", "x", "verl-fsdp-update", *extra])
    assert result.exit_code == code, result.output
    assert f"{A[:12]} (10.0.0.1)  {states[0]}" in result.output and f"{B[:12]} (10.0.0.2)  {states[1]}" in result.output
    if on_nodes.RECORDED in states:
        assert f"{A[:12]} (10.0.0.1)  pid 11: steps 0-1 recorded -> /t/11.pt.trace.json" in result.output
    if code and on_nodes.NOTHING_MATCHED in states and not extra:
        assert f"node {B[:12]} (10.0.0.2): nothing matched" in result.output and "pass --skip-empty" in result.output
    if code and set(states) == {on_nodes.NOTHING_MATCHED}:
        assert "no node attached any process whose command line holds 'x'" in result.output


def test_json_gives_each_node_and_ctrl_c_exits_130(monkeypatch):
    nodes_answer(monkeypatch, on_nodes.DETACHED, on_nodes.NO_ANSWER, interrupted=True)
    result = CliRunner().invoke(main, ["attach", "--ray", "auto", "--match", "x", "verl-fsdp-update",
                                                       "--json"])
    assert result.exit_code == 130, result.output
    data = json.loads(result.stdout)
    assert [(d["node_id"], d["state"], d["ok"]) for d in data] == [(A, "detached", False), (B, "no answer", False)]
