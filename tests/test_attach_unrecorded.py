"""An attach that would record nothing is a failure: a backend that cannot record in the job is refused before
anything there changes (exit 1, naming the backend that can), and a process whose window ends with nothing recorded
fails the command (exit 1, its line saying why and what to do); a job that has what the backend needs is let in.
Real CPU torch jobs started without patchkit (with the CPU stand-in for torch_npu where one must exist), on this
machine and on a one-node Ray cluster, and the agent run in this process as a job runs it."""

from __future__ import annotations

import json
import os
import sys
import tempfile

import pytest

import attach_helpers as helpers
from attach_helpers import Job, attach
from doubles import DOUBLES_DIR
from patchkit.attach import payload
from patchkit.runtime.attach import agent
from patchkit.runtime.attach.agent import RUNTIME

REAL = pytest.mark.skipif(bool(helpers.gdb_missing() or helpers.ptrace_denied()),
                          reason=helpers.gdb_missing() or helpers.ptrace_denied() or "")
NO_TORCH_NPU = (f"the npu backend cannot record in this job: torch_npu is not installed in the job's environment "
                f"({sys.executable}); hint: --backend torch can record here")


def test_the_agent_refuses_a_backend_the_job_cannot_record_with_before_anything_changes(tmp_path, monkeypatch,
                                                                                           clean_runtime, capsys):
    site = helpers.site(tmp_path)
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.delitem(sys.modules, "pkjob.train", raising=False)
    monkeypatch.delitem(sys.modules, "pkjob", raising=False)
    import pkjob.train as train

    inner = vars(train.Trainer)["step_logged"].__closure__[0].cell_contents
    original = inner.__code__
    s = payload.settings(str(helpers.recipe(tmp_path, "logged")), [], "npu", 2)
    spec = dict(payload.request(s, 2, str(site)), id="t", channel=tempfile.mkdtemp(dir=tmp_path), runtime_from="")
    try:
        agent.attach(spec)
        with open(os.path.join(spec["channel"], "status.json")) as f:
            status = json.load(f)
        assert status["state"] == "refused" and status["error"] == NO_TORCH_NPU, status
        assert inner.__code__ is original and RUNTIME not in vars(train) and not agent.ACTIVE
        assert capsys.readouterr().err.endswith(f"attach: {NO_TORCH_NPU}; nothing changed, the job runs on\n")
        assert "torch_npu" not in sys.modules
    finally:
        for name in ("pkjob.train", "pkjob"):
            sys.modules.pop(name, None)
        agent.ACTIVE.clear()


def unattached_and_attached(jobs, tmp_path, path, steps):
    """Two jobs of ``steps`` steps with ``path`` their PYTHONPATH, one never attached, the other past its 10th step."""
    plain = Job(tmp_path, path, steps=steps, name="plain")
    job = Job(tmp_path, path, steps=steps)
    jobs += [plain, job]
    job.wait_steps(10)
    return plain, job


@REAL
@pytest.mark.parametrize("case", ["no torch_npu", "torch_npu never imported"])
def test_an_npu_recipe_on_a_cpu_torch_job_is_refused_before_anything_changes(tmp_path, jobs, case):
    site = helpers.site(tmp_path)
    stand_in = case == "torch_npu never imported"  # the CPU stand-in for torch_npu on the job's path
    plain, job = unattached_and_attached(jobs, tmp_path, os.pathsep.join([str(site), DOUBLES_DIR]) if stand_in else
                                         site, 120)
    done = attach(tmp_path, [job.pid, helpers.recipe(tmp_path, "logged"), "--root", site, "--backend", "npu",
                             "profiler.contents=[cpu,npu]"])
    why = ("the job has not imported torch_npu, so it runs nothing on an NPU" if stand_in else
           f"torch_npu is not installed in the job's environment ({sys.executable})")
    refusal = f"the npu backend cannot record in this job: {why}; hint: --backend torch can record here"
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
    assert f"pid {job.pid}: refused: {refusal}; nothing changed\n" in done.stderr
    assert f"error: pid {job.pid}: refused: {refusal}\n" in done.stderr
    err = helpers.left_as_it_was(plain, job, 120)
    assert err == f"[patchkit] attach: {refusal}; nothing changed, the job runs on\n"
    assert not (tmp_path / "traces").exists()
    assert not [p for p in os.listdir(tempfile.gettempdir()) if p.startswith(f"patchkit-attach-{job.pid}-")]


@REAL
def test_a_window_whose_capture_fails_records_nothing_and_fails_the_command(tmp_path, jobs):
    site = helpers.site(tmp_path)
    shared = tmp_path / "shared"  # anybody may write here: no capture goes into it
    shared.mkdir()
    shared.chmod(0o777)
    plain, job = unattached_and_attached(jobs, tmp_path, site, 120)
    done = attach(tmp_path, [job.pid, helpers.recipe(tmp_path, "logged"), "--root", site, "--steps", 2,
                             f"profiler.save_path={shared}/traces", "--json"])
    assert done.returncode == 1, done.stderr
    (status,) = json.loads(done.stdout)
    assert status["state"] == "restored" and status["original_code"] is True
    (line,) = [ln for ln in done.stderr.splitlines() if ln.startswith(f"pid {job.pid}: nothing recorded")]
    assert line.startswith(f"pid {job.pid}: nothing recorded: the capture failed (profiler.save_path {shared}/traces "
                           f"is refused: {shared} ")
    assert line.endswith("; the job's own code is back (the capture ended with an error before any window); fix its "
                         "cause (the job's stderr says it too) and attach again")
    helpers.left_as_it_was(plain, job, 120)
    assert not (shared / "traces").exists()


@REAL
def test_a_process_the_recipe_leaves_out_records_nothing_and_the_command_fails_saying_so(tmp_path, jobs):
    site = helpers.site(tmp_path)
    plain, job = unattached_and_attached(jobs, tmp_path, site, 120)
    done = attach(tmp_path, [job.pid, helpers.recipe(tmp_path, "logged"), "--root", site, "profiler.ranks=[3]"])
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
    assert f"pid {job.pid}: nothing recorded: its capture never started in this process; the job's own code is back" \
        in done.stderr
    assert "error: nothing recorded in any process: no capture started in one\n  hint: the recipe's profiler.ranks " \
        "or profiler.replicas leave every process out" in done.stderr
    helpers.left_as_it_was(plain, job, 120)


@REAL
def test_on_every_node_a_backend_that_cannot_record_is_refused_and_a_failed_capture_fails_its_node(tmp_path, jobs):
    from raycluster import one_node

    site = helpers.site(tmp_path)
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    job = Job(tmp_path, site, steps=100000)
    jobs.append(job)
    with one_node({"PATCHKIT_HOME": str(tmp_path / "node-home")}) as address:
        job.wait_steps(10)
        ray = ["--ray", address, "--match", job.log, helpers.recipe(tmp_path, "logged"), "--root", site]
        refused = attach(tmp_path, [*ray, "--backend", "npu"])
        failed = attach(tmp_path, [*ray, f"profiler.save_path={shared}/traces", "--json"])
    assert refused.returncode == 1 and "Traceback" not in refused.stderr, refused.stderr
    assert f"  refused: pid {job.pid}: refused: {NO_TORCH_NPU}; hint: nothing stays changed" in refused.stderr
    assert f"  pid {job.pid}: refused: {NO_TORCH_NPU}; nothing changed\n" in refused.stderr
    assert failed.returncode == 1 and "Traceback" not in failed.stderr, failed.stderr
    (node,) = json.loads(failed.stdout)
    assert node["state"] == "incomplete" and not node["ok"]
    assert node["message"].startswith(f"pid {job.pid}: nothing recorded: the capture failed (profiler.save_path "
                                      f"{shared}/traces is refused")
    assert node["message"].endswith("; fix its cause (the job's stderr says it too) and attach again")
    final, _ = job.finish()
    assert all(final["original"].values()) and final["left"] == []


@REAL
def test_a_job_that_imported_torch_npu_with_an_npu_available_is_let_in_and_records_with_the_npu_backend(tmp_path, jobs):
    site = helpers.site(tmp_path)
    early = tmp_path / "early"  # the job imports torch_npu (the CPU stand-in) at its start, as an Ascend job does
    early.mkdir()
    (early / "sitecustomize.py").write_text("import torch_npu\n")
    path = os.pathsep.join([str(site), str(early), DOUBLES_DIR])
    plain, job = unattached_and_attached(jobs, tmp_path, path, 120)
    done = attach(tmp_path, [job.pid, helpers.recipe(tmp_path, "logged"), "--root", site, "--backend", "npu",
                             "profiler.contents=[cpu,npu]", "--steps", 2, "--json"])
    assert done.returncode == 0, done.stderr
    (status,) = json.loads(done.stdout)
    (capture,) = status["captures"]
    assert capture["backend"] == "npu" and capture["recorded"] == [[0, 1]] and capture["traces"], capture
    assert all("_ascend_pt" in t for t in capture["traces"])
    helpers.left_as_it_was(plain, job, 120)
