"""cluster: the driver side of --ray, against a stand-in for Ray whose nodes answer as each test says.

tests/test_ray.py runs the same commands on a real two-node cluster; here
each node's answer is chosen, so the all-or-nothing apply, its rollback,
timeouts and tasks that cannot run are checked on their own, on CPU.
"""

from __future__ import annotations

import sys
from types import ModuleType, SimpleNamespace

import pytest

from patchkit.cluster import ray as cluster
from patchkit.cluster.ray import ClusterError
from patchkit.core.errors import PatchkitError
from patchkit.cluster.node import NodeResult, NodeState

A, B = "a" * 56, "b" * 56


class Ref:
    def __init__(self, value, hang=False):
        self.value, self.hang, self.cancelled = value, hang, False


class FakeRay(ModuleType):
    """Just what cluster.py calls.  ``answer(node_id, op, args)`` gives a node's NodeResult fields, raises
    (the task could not run), or returns None (no answer: the task hangs)."""

    def __init__(self, answer, nodes=((A, "10.0.0.1"), (B, "10.0.0.2")), initialized=True):
        super().__init__("ray")
        self.answer, self.initialized, self.tasks, self.inits = answer, initialized, [], []
        self.refs, self.cancelled = [], []
        self._nodes = [{"NodeID": n, "NodeManagerAddress": ip, "Alive": True} for n, ip in nodes]
        self.util = SimpleNamespace(scheduling_strategies=SimpleNamespace(NodeAffinitySchedulingStrategy=Strategy))

    def is_initialized(self):
        return self.initialized

    def init(self, address, **kwargs):
        self.inits.append(address)
        self.initialized = True

    def shutdown(self):
        self.initialized = False

    def nodes(self):
        return self._nodes

    def remote(self, fn):
        assert fn.__module__ == "patchkit.cluster.node" and fn.__name__ == "on_node"
        return Task(self)

    def wait(self, refs, num_returns, timeout):
        """Ray's answer: the first ``num_returns`` done (the hanging never are), or fewer at the timeout."""
        assert 0 <= timeout <= cluster.timeout()
        ready = [r for r in refs if not r.hang][:num_returns]
        return ready, [r for r in refs if r not in ready]

    def get(self, ref):
        if isinstance(ref.value, BaseException):
            raise ref.value
        return ref.value

    def cancel(self, ref, force):
        ref.cancelled = force
        self.cancelled.append(self.refs.index(ref))


class Strategy:
    def __init__(self, node_id, soft):
        self.node_id, self.soft = node_id, soft


class Task:
    def __init__(self, ray):
        self.ray = ray

    def options(self, **options):
        return SimpleNamespace(remote=lambda op, args: self._run(options, op, args))

    def _run(self, options, op, args):
        node = options["scheduling_strategy"].node_id
        self.ray.tasks.append((node, op, args, options))
        self.ray.refs.append(self._answer(node, op, args))
        return self.ray.refs[-1]

    def _answer(self, node, op, args):
        try:
            fields = self.ray.answer(node, op, args)
        except Exception as exc:
            return Ref(exc)
        if fields is None:
            return Ref(None, hang=True)
        ip = dict((n["NodeID"], n["NodeManagerAddress"]) for n in self.ray._nodes)[node]
        return Ref({"node_id": node, "ip": ip, "recipe": args["label"], "message": "", **fields})


@pytest.fixture
def use(monkeypatch):
    """``use(answer)`` puts a stand-in Ray in place; returns it."""

    def install(answer, **kwargs):
        ray = FakeRay(answer, **kwargs)
        monkeypatch.setitem(sys.modules, "ray", ray)
        monkeypatch.setitem(sys.modules, "ray.util", ray.util)
        monkeypatch.setitem(sys.modules, "ray.util.scheduling_strategies", ray.util.scheduling_strategies)
        return ray

    return install


def ok(state, **more):
    return {"state": state, **more}


def test_one_task_per_alive_node_pinned_to_it(use, tmp_path, monkeypatch):
    ray = use(lambda node, op, args: ok(NodeState.WOULD_CHANGE, diff=f"patch of {node[0]}"))
    monkeypatch.chdir(tmp_path)
    results = cluster.plan("auto", "r", ["schedule.wait=2"], "torch", "site")
    assert [(r.node_id, r.ip, r.state, r.diff) for r in results] == [
        (A, "10.0.0.1", "would change", "patch of a"), (B, "10.0.0.2", "would change", "patch of b")]
    for (node, op, args, options), expected in zip(ray.tasks, (A, B)):
        assert (node, op, args["label"]) == (expected, "plan", "r")
        assert args["kwargs"] == {"recipe": "r", "overrides": ["schedule.wait=2"], "backend": "torch",
                                  "root": str(tmp_path / "site")}  # a relative --root names the same folder on every node
        assert (options["num_cpus"], options["max_retries"], options["scheduling_strategy"].soft) == (0, 0, False)
    cluster.plan("auto", "r", root="~/site", skip_version_check=True)
    assert ray.tasks[-1][2]["kwargs"]["root"] == "~/site" and ray.tasks[-1][2]["kwargs"]["skip_version_check"] is True
    assert ray.initialized  # a connection the caller made stays open


def test_a_connection_made_here_is_closed_again_and_a_refused_one_explained(use):
    ray = use(lambda node, op, args: ok(NodeState.NOTHING_APPLIED), initialized=False)
    cluster.status("auto")
    assert ray.inits == ["auto"] and not ray.initialized

    def refuse(address, **kwargs):
        raise ConnectionError("nobody there")

    ray.init = refuse
    with pytest.raises(ClusterError) as exc:
        cluster.status("auto")
    assert exc.value.message == "cannot connect to the Ray cluster at auto: nobody there" and "ray start" in exc.value.hint


def test_an_address_nobody_listens_on_fails_before_ray_tries(use):
    ray = use(lambda node, op, args: ok(NodeState.NOTHING_APPLIED), initialized=False)
    with pytest.raises(ClusterError, match="cannot connect to the Ray cluster at 127.0.0.1:1"):
        cluster.status("127.0.0.1:1")
    assert ray.inits == []


def test_without_ray_says_how_to_install_it(monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)
    with pytest.raises(ClusterError) as exc:
        cluster.status("auto")
    assert "needs Ray" in exc.value.message and 'pip install "patchkit-profiler[ray]"' in exc.value.hint


def test_a_cluster_without_alive_nodes(use):
    use(lambda node, op, args: ok(NodeState.NOTHING_APPLIED), nodes=())
    with pytest.raises(ClusterError, match="no alive node"):
        cluster.status("auto")


def test_apply_plans_everywhere_first_and_writes_nowhere_if_a_plan_fails(use):
    def answer(node, op, args):
        assert op == "plan", "nothing may be applied"
        return ok(NodeState.WOULD_CHANGE) if node == A else ok(NodeState.FAILED, ok=False, message="no anchor")

    use(answer)
    a, b = cluster.apply("auto", "r")
    assert (a.state, a.message) == (NodeState.NOT_APPLIED, "another node cannot apply; nothing was written here")
    assert (b.state, b.ok, b.message) == (NodeState.FAILED, False, "no anchor")


def test_apply_everywhere_carries_the_skipped_version_check(use):
    ray = use(lambda node, op, args: ok(NodeState.WOULD_CHANGE, version_skipped="verl 0.6.1 is installed")
              if op == "plan" else ok(NodeState.PATCHED, changed=True))
    results = cluster.apply("auto", "r", skip_version_check=True)
    assert [(r.state, r.version_skipped) for r in results] == [(NodeState.PATCHED, "verl 0.6.1 is installed")] * 2
    assert [op for _node, op, _args, _o in ray.tasks] == ["plan", "plan", "apply", "apply"]


@pytest.mark.parametrize("changed_on_a,rollback_ok", [(True, True), (True, False), (False, True)])
def test_a_node_failing_to_apply_puts_the_others_back(use, changed_on_a, rollback_ok):
    def answer(node, op, args):
        if op == "plan":
            return ok(NodeState.WOULD_CHANGE)
        if op == "apply":
            if node == B:
                return ok(NodeState.FAILED, ok=False, message="cannot write the ledger")
            return ok(NodeState.PATCHED if changed_on_a else NodeState.ALREADY_APPLIED, changed=changed_on_a,
                      root="/site", previous={"/site/x.py": {"overrides": [], "recipe_path": "r.yaml"}},
                      message="x.py (9 lines)")
        assert op == "rollback" and node == A
        assert args["kwargs"] == {"recipe": "r", "root": "/site",
                                  "previous": {"/site/x.py": {"overrides": [], "recipe_path": "r.yaml"}}}
        return ok(NodeState.ROLLED_BACK) if rollback_ok else ok(NodeState.FAILED, ok=False, message="disk full")

    ray = use(answer)
    a, b = cluster.apply("auto", "r")
    assert (b.state, b.ok) == (NodeState.FAILED, False)
    if not changed_on_a:
        assert (a.state, a.message) == (NodeState.LEFT_AS_IT_WAS, "already applied before this command; x.py (9 lines)")
        assert "rollback" not in [op for _n, op, _a, _o in ray.tasks]
    elif rollback_ok:
        assert a.state is NodeState.ROLLED_BACK
    else:
        assert (a.state, a.ok, a.message) == (NodeState.ROLLBACK_FAILED, False, "disk full")


def test_a_node_that_does_not_answer_in_time_is_named_and_its_task_cancelled(use, monkeypatch):
    monkeypatch.setenv("PATCHKIT_RAY_TIMEOUT", "7")
    ray = use(lambda node, op, args: None if node == B else ok(NodeState.NOTHING_APPLIED))
    a, b = cluster.status("auto")
    assert a.ok and (b.ok, b.state) == (False, NodeState.FAILED)
    assert b.message == "no answer within 7 s (PATCHKIT_RAY_TIMEOUT); check this node with `patchkit status --ray`"
    assert cluster.timeout() == 7.0
    assert ray.cancelled == [1] and ray.refs[1].cancelled is True  # B's task, forced: it hangs
    monkeypatch.setenv("PATCHKIT_RAY_TIMEOUT", "")
    assert cluster.timeout() == 300.0


def test_a_task_that_cannot_run_says_why(use):
    def answer(node, op, args):
        if node == A:
            raise RuntimeError("Traceback...\nModuleNotFoundError: No module named 'patchkit'\n")
        raise RuntimeError("the node died\n\n")

    use(answer)
    a, b = cluster.status("auto")
    assert a.message.startswith("patchkit is not installed in this node's environment (ModuleNotFoundError: No module "
                                "named 'patchkit'); pip install \"patchkit-profiler[ray]\"")
    assert b.message == "the task could not run: RuntimeError: the node died"
    assert not a.ok and not b.ok


def test_revert_needs_recipes_or_everything_and_labels_the_nodes(use):
    with pytest.raises(PatchkitError, match="say which recipes to revert"):
        cluster.revert("auto")
    ray = use(lambda node, op, args: ok(NodeState.REVERTED))
    results = cluster.revert("auto", ["r1", "r2"], root="/site", force=True)
    assert all(isinstance(r, NodeResult) and r.recipe == "r1,r2" for r in results)
    assert ray.tasks[0][2]["kwargs"] == {"recipes": ["r1", "r2"], "everything": False, "root": "/site", "force": True}
    cluster.revert("auto", everything=True)
    assert ray.tasks[-1][2]["label"] == "all"


def test_each_stage_tells_its_progress_the_nodes_as_they_answer(use):
    from progress_helpers import Recorder

    use(lambda node, op, args: ok(NodeState.PATCHED if op == "apply" else NodeState.WOULD_CHANGE, changed=True))
    recorder = Recorder()
    cluster.apply("auto", "r", progress=recorder)
    assert recorder.summary() == [("planning on 2 node(s)", "nodes", 2, 2), ("applying on 2 node(s)", "nodes", 2, 2)]
    for op, call in (("reverting", lambda p: cluster.revert("auto", ["r"], progress=p)),
                     ("reading the status", lambda p: cluster.status("auto", progress=p)),
                     ("planning", lambda p: cluster.plan("auto", "r", progress=p))):
        recorder = Recorder()
        call(recorder)
        assert recorder.summary() == [(f"{op} on 2 node(s)", "nodes", 2, 2)]


def test_a_node_that_never_answers_leaves_its_count_out_and_the_rest_rolled_back_are_counted(use, monkeypatch):
    from progress_helpers import Recorder

    monkeypatch.setenv("PATCHKIT_RAY_TIMEOUT", "0.2")
    states = {"plan": NodeState.WOULD_CHANGE, "apply": NodeState.PATCHED, "rollback": NodeState.ROLLED_BACK}
    use(lambda node, op, args: None if node == B and op == "apply" else ok(states[op], changed=True))
    recorder = Recorder()
    a, b = cluster.apply("auto", "r", progress=recorder)
    assert recorder.summary() == [("planning on 2 node(s)", "nodes", 2, 2), ("applying on 2 node(s)", "nodes", 2, 1),
                                  ("putting back on 1 node(s)", "nodes", 1, 1)]
    assert not b.ok and "no answer within 0.2 s" in b.message and a.state is NodeState.ROLLED_BACK
