"""``patchkit attach --ray ADDRESS --match TEXT``: the same ``--match`` attach on every alive node of a Ray cluster.

One task pinned to each alive node (node affinity, ``soft=False``; no retry: a second run would attach again)
runs the local session there (:func:`patchkit.attach.flow.run`), in that node's ``PATCHKIT_HOME`` and root:
it finds the processes whose command line holds TEXT, checks them all, gets in, waits until every window has
closed, and answers with plain data: the processes matched, what each recorded and where, each refusal and why.
Pids are the node's own, so only ``--match`` names processes here.

Ctrl-C on the driver: :func:`attach_every_node` cancels every node's task with ``force=False``, which Ray turns
into KeyboardInterrupt inside the task; the task asks each of its processes to put the job's own code back (a
window in progress closes at its next step, its trace kept), waits for them, and still answers.  A task Ray
kills instead (the driver gone, ``force=True``) leaves its jobs to restore themselves when their windows close,
or at ``patchkit detach PID`` on that node (the records are in the node's ``PATCHKIT_HOME``).

What a node answers is untrusted: :func:`checked` keeps only the fields it knows, of their types, bounded.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from patchkit.core.errors import PatchkitError
from patchkit.runtime.attach.protocol import Reason

RECORDED = "recorded"  # every process it attached gave the job its own code back, with its window recorded
NOTHING_MATCHED = "nothing matched"  # no process of the node has TEXT in its command line
NOTHING_TO_ATTACH = "nothing to attach"  # some matched, each passed over (a launcher, a driver, a decoy)
REFUSED = "refused"  # a check or a process refused: nothing stays changed on the node
INCOMPLETE = "incomplete"  # in, but some process did not end with its own code back (it ended, ...)
DETACHED = "detached"  # Ctrl-C: every process was asked out
FAILED = "failed"  # the task could not run there, or failed
NO_ANSWER = "no answer"  # after Ctrl-C, the driver stopped waiting for it
STATES = (RECORDED, NOTHING_MATCHED, NOTHING_TO_ATTACH, REFUSED, INCOMPLETE, DETACHED, FAILED, NO_ANSWER)
EMPTY = (NOTHING_MATCHED, NOTHING_TO_ATTACH)

REASONS = {r.value for r in Reason}  # why an agent refused, as the node's answer may say it
TEXT, LONG, MANY = 300, 4000, 4096  # bounds on what a node's answer may hold: a field, a message, a list


@dataclass
class NodeAttach:
    """What one node's session did; ``processes``: one dict per process matched (:func:`checked` says its keys)."""

    node_id: str
    ip: str
    state: str
    message: str = ""
    home: str = ""
    processes: List[Dict[str, Any]] = field(default_factory=list)

    @property
    def node(self) -> str:
        return f"{self.node_id[:12]} ({self.ip})"

    @property
    def attached(self) -> List[Dict[str, Any]]:
        """The processes it got into (those passed over aside)."""
        return [p for p in self.processes if not p["passed_over"] and p["state"] != "matched"]

    @property
    def ok(self) -> bool:
        """At least one process attached, and every one it attached ended restored, saying its own code is back."""
        got = self.attached
        return self.state in (RECORDED, DETACHED) and bool(got) and all(
            p["state"] == "restored" and p["original_code"] is True for p in got)


# ---------------------------------------------------------------- on each node


def _here(job: Dict[str, Any]) -> Dict[str, Any]:
    """In a Ray worker on one node: the ``--match`` session there.  Plain data in and out; never raises."""
    import ray

    from patchkit.attach import flow
    from patchkit.attach.passover import PassedOver
    from patchkit.attach.process import machine, matching
    from patchkit.attach.session import Session
    from patchkit.core.manifest import home

    out: Dict[str, Any] = {"node_id": ray.get_runtime_context().get_node_id(), "state": FAILED, "message": "",
                           "home": home(), "processes": []}
    match, s = job["match"], None
    try:
        here = machine()  # the driver, where it runs on this node, matches TEXT too: never attach to it
        found = matching(match, [job["driver"]] if here and job.get("machine") == here else [])
        out["processes"] = [{"pid": p.pid, "state": "matched", "command": p.command[:TEXT]} for p in found]
        if not found:
            whose = "any user's" if os.geteuid() == 0 else f"user {os.geteuid()}'s (the node's Ray workers')"
            out.update(state=NOTHING_MATCHED, message=f"no process ({whose}) has {match!r} in its command line")
            return out
        s = Session([p.pid for p in found], job["recipe"], job["overrides"], job["backend"], job["root"],
                    tuple(job["versions"]), job["steps"])
        s.prepare(pass_over=True)  # a process a check of its own refuses is passed over, as on one machine

        def interrupted(again: bool) -> None:  # ray.cancel(force=False): the driver was interrupted
            out.update(state=DETACHED, message="interrupted: each process was asked to put the job's own code back"
                       + (" (not waited for: each job restores at its next step)" if again else ""))

        if not flow.through(s, None, job["timeout"], match, on_interrupt=interrupted):
            well = all(flow.ended_well(a) for a in s.attached if not flow.passed_over(a, match))
            out.update(state=RECORDED if well else INCOMPLETE, message="" if well else "; ".join(
                f"pid {a.pid}: " + ("; ".join(a.state == "restored" and flow.unrecorded(a.status) or ()) or
                                    f"{a.state}: {a.status.get('error') or a.status.get('why') or 'not restored'}")
                for a in s.attached if not flow.passed_over(a, match) and not flow.ended_well(a)))
    except KeyboardInterrupt:  # while the processes were checked: none is in yet
        out.update(state=DETACHED, message="interrupted before any process was attached: nothing changed")
    except PatchkitError as exc:
        everyone_skipped = isinstance(exc, PassedOver)
        out.update(state=NOTHING_TO_ATTACH if everyone_skipped else REFUSED,
                   message=f"each of the {len(s.passed) + len(s.attached)} processes matched was passed over"
                   if everyone_skipped else exc.render() + "\n  nothing stays changed on this node")
    except Exception as exc:  # the node's environment may be anything: report, never crash the driver
        out.update(state=FAILED, message=f"{type(exc).__name__}: {exc}")
    finally:
        if s is not None:
            s.close()  # flow.through closed it already, unless a check failed first: a second close removes nothing
            out["message"] = "; ".join([m for m in [out["message"], *s.left] if m])  # what the bounds left behind
            if s.attached or s.passed:
                out["processes"] = [_process(a, match) for a in s.attached] + [p.as_json() for p in s.passed]
    return out


def _process(a, match: Optional[str]) -> Dict[str, Any]:
    from patchkit.attach.flow import passed_over

    keep = ("attached_at", "why", "captures", "error", "targets", "functions", "original_code", "steps", "reason")
    return dict({k: a.status.get(k) for k in keep}, pid=a.pid, state=a.state, passed_over=passed_over(a, match),
                command=a.target.proc.command[:TEXT], python=a.target.python.shown, way=a.target.way)


# ---------------------------------------------------------------- on the driver


def job_for(match: str, recipe: str, overrides: Sequence[str], backend: Optional[str], root: Optional[str],
            versions=(False, None), steps: int = 1, timeout: float = 60) -> Dict[str, Any]:
    """What every node is asked: a recipe file and ``root`` made absolute here, strict here strict everywhere, and
    this process (whose command line holds TEXT) to be passed over where it runs."""
    from patchkit.attach.process import machine
    from patchkit.cluster.ray import _root_arg
    from patchkit.state.versioncheck import strict_default

    if recipe.endswith((".yaml", ".yml")) or "/" in recipe:
        recipe = recipe if recipe.startswith("~") else os.path.abspath(recipe)
    skip, strict = versions
    strict = True if strict or (strict is None and strict_default()) else None
    return {"match": match, "recipe": recipe, "overrides": list(overrides), "backend": backend,
            "root": _root_arg(root), "versions": [bool(skip), strict], "steps": int(steps), "timeout": float(timeout),
            "driver": os.getpid(), "machine": machine()}


def attach_every_node(address: str, job: Dict[str, Any], on_start: Optional[Callable[[int], None]] = None,
                      on_result: Optional[Callable[[NodeAttach], None]] = None,
                      on_interrupt: Optional[Callable[[int], None]] = None) -> Tuple[List[NodeAttach], bool]:
    """Every alive node's session (:func:`job_for` says what it is asked); its result per node, in the nodes'
    order, and whether the driver was interrupted.

    ``on_start(nodes)`` once the tasks are out, ``on_result`` with each node as it answers.  KeyboardInterrupt
    (Ctrl-C; the caller may turn SIGTERM into one in ``on_start``, after Ray set its own handler) cancels every
    task still running (``force=False``: KeyboardInterrupt in the task, which detaches), tells
    ``on_interrupt(nodes still running)``, and waits for their answers; a second one stops waiting."""
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    from patchkit.cluster.ray import alive_nodes, connect

    with connect(address) as ray:
        nodes = alive_nodes(ray)
        task = ray.remote(_here)
        refs = [task.options(name="patchkit attach", num_cpus=0, max_retries=0, scheduling_strategy=(
            NodeAffinitySchedulingStrategy(n["node_id"], soft=False))).remote(job) for n in nodes]
        by_ref = {ref: n for ref, n in zip(refs, nodes)}
        results: Dict[Any, NodeAttach] = {}
        pending = list(refs)
        if on_start is not None:
            on_start(len(nodes))
        interrupted = False
        try:
            _answers(ray, pending, by_ref, results, on_result)
        except KeyboardInterrupt:
            interrupted = True
            for ref in pending:
                ray.cancel(ref, force=False, recursive=False)
            if on_interrupt is not None:
                on_interrupt(len(pending))
            try:
                _answers(ray, pending, by_ref, results, on_result)
            except KeyboardInterrupt:
                pass  # the nodes still running are said unanswered
        return [results.get(r) or _unanswered(by_ref[r]) for r in refs], interrupted


def _unanswered(n: Dict[str, str]) -> NodeAttach:
    return NodeAttach(n["node_id"], n["ip"], NO_ANSWER, "asked to detach, not waited for: each job puts its own code "
                      "back at its next step; `patchkit attach --status PID` on that node says what is attached")


def _answers(ray, pending: List[Any], by_ref: Dict[Any, Dict[str, str]], results: Dict[Any, NodeAttach],
             on_result) -> None:
    """Each node's answer as it comes (``pending`` shrinks as they do); no deadline: a window lasts its steps."""
    while pending:
        ready, _ = ray.wait(list(pending), num_returns=1, timeout=1.0)
        for ref in ready:
            pending.remove(ref)
            results[ref] = _answer(ray, ref, by_ref[ref])
            if on_result is not None:
                on_result(results[ref])


def _answer(ray, ref, n: Dict[str, str]) -> NodeAttach:
    from patchkit.cluster.ray import _task_failure

    try:
        data = ray.get(ref, timeout=60)
    except Exception as exc:
        if type(exc).__name__ == "TaskCancelledError":
            return NodeAttach(n["node_id"], n["ip"], DETACHED, "cancelled: its session was asked to put the jobs' "
                              "own code back; `patchkit attach --status PID` on that node says what is attached")
        return NodeAttach(n["node_id"], n["ip"], FAILED, _task_failure(exc))
    return checked(data, n)


def _text(value: Any, bound: int = TEXT) -> str:
    return value[:bound] if isinstance(value, str) else ""


def _int(value: Any) -> Optional[int]:
    return value if isinstance(value, int) and not isinstance(value, bool) and abs(value) < 1 << 62 else None


def _list(value: Any) -> List[Any]:
    return list(value[:MANY]) if isinstance(value, list) else []


def checked(data: Any, n: Dict[str, str]) -> NodeAttach:
    """A node's answer, read as untrusted: only the known fields, each of its type and bounded; the node's id
    and address are the driver's own."""
    if not isinstance(data, dict) or data.get("state") not in STATES:
        what = repr(data.get("state"))[:60] if isinstance(data, dict) else type(data).__name__
        return NodeAttach(n["node_id"], n["ip"], FAILED, f"the node answered with {what}: check its patchkit "
                                                         "(the same version on every node)")
    procs = [p for p in map(_checked_process, _list(data.get("processes"))) if p is not None]
    return NodeAttach(n["node_id"], n["ip"], data["state"], _text(data.get("message"), LONG),
                      _text(data.get("home")), procs)


def _checked_process(p: Any) -> Optional[Dict[str, Any]]:
    if not isinstance(p, dict) or _int(p.get("pid")) is None:
        return None
    captures = []
    for c in _list(p.get("captures")):
        if isinstance(c, dict):
            spans = [[_int(s[0]), _int(s[1])] for s in _list(c.get("recorded"))
                     if isinstance(s, list) and len(s) == 2 and _int(s[0]) is not None and _int(s[1]) is not None]
            captures.append({"recorded": spans, "traces": [_text(t, LONG) for t in _list(c.get("traces"))
                                                           if isinstance(t, str)], "error": _text(c.get("error"), LONG)})
    at = p.get("attached_at")
    return {"pid": p["pid"], "state": _text(p.get("state"), 40) or "?", "passed_over": p.get("passed_over") is True,
            "command": _text(p.get("command")), "python": _text(p.get("python")), "way": _text(p.get("way"), 40),
            "why": _text(p.get("why")), "error": _text(p.get("error"), LONG),
            "reason": p["reason"] if isinstance(p.get("reason"), str) and p["reason"] in REASONS else None,
            "targets": [_text(t) for t in _list(p.get("targets")) if isinstance(t, str)],
            "functions": _int(p.get("functions")), "steps": _int(p.get("steps")),
            "original_code": p.get("original_code") if isinstance(p.get("original_code"), bool) else None,
            "attached_at": at if isinstance(at, float) else None, "captures": captures}
