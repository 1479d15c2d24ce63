"""`patchkit run`: the demo sample profiled with its files read-only and unchanged, children included; a recipe
that does not fit stops COMMAND from starting; a file changed since the plan runs unpatched, with one line."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from patchkit.demo import SAMPLE
from patchkit.hook.editfree import HOOK_DIR
from runtime_helpers import profiler_steps, trace_files

REPO = Path(__file__).resolve().parent.parent
DP = "verl/workers/actor/dp_actor.py"
WINDOW = ["backend=torch", "granularity=micro", "schedule.wait=1", "schedule.warmup=1", "schedule.active=3"]


@pytest.fixture
def site(tmp_path):
    """A read-only copy of the demo sample, with the bytes and mtimes of its files."""
    root = tmp_path / "site"
    shutil.copytree(SAMPLE, root, ignore=shutil.ignore_patterns("__pycache__"))
    for path in sorted(root.rglob("*"), reverse=True):
        path.chmod(path.stat().st_mode & ~(stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH))
    yield root
    for path in root.rglob("*"):
        path.chmod(path.stat().st_mode | stat.S_IWUSR)
    root.chmod(root.stat().st_mode | stat.S_IWUSR)


def _state(root):
    return {p.relative_to(root).as_posix(): (p.read_bytes(), p.stat().st_mtime_ns) for p in sorted(root.rglob("*"))
            if p.is_file()}


def run(tmp_path, site, args, command, **extra_env):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(site), str(REPO)]), PATCHKIT_HOME=str(tmp_path / "home"),
               **extra_env)
    env.pop("PATCHKIT_RUN", None)
    return subprocess.run([sys.executable, "-m", "patchkit", "run", "verl-fsdp-update", "--root", str(site), *args,
                           f"profiler.save_path={tmp_path / 'traces'}", "--", *command],
                          capture_output=True, text=True, env=env, cwd=tmp_path, timeout=600)


def test_the_demo_runs_patched_in_memory_with_its_files_read_only_and_unchanged(tmp_path, site):
    before = _state(site)
    done = run(tmp_path, site, WINDOW, [sys.executable, "-m", "patchkit.demo.train", "--updates", "4"])
    assert done.returncode == 0, done.stderr[-3000:]
    assert "patching verl.workers.actor.dp_actor in memory" in done.stderr
    (trace,) = trace_files(tmp_path / "traces")
    assert profiler_steps(trace) == ["ProfilerStep#2", "ProfilerStep#3", "ProfilerStep#4"]
    assert _state(site) == before and not list(site.rglob("__pycache__"))


CHILDREN = textwrap.dedent("""\
    import multiprocessing, subprocess, sys

    def train():
        from patchkit.demo import train
        sys.argv = ["train", "--updates", "4"]
        train.main()

    if __name__ == "__main__":
        child = multiprocessing.get_context("spawn").Process(target=train)
        child.start(); child.join()
        grandchild = subprocess.run([sys.executable, "-c", "import sys; print('libcst' in sys.modules)"],
                                    capture_output=True, text=True)
        print("spawned", child.exitcode, "libcst in a child:", grandchild.stdout.strip())
    """)


def test_a_spawned_child_is_instrumented_and_no_child_parses_anything(tmp_path, site):
    (tmp_path / "children.py").write_text(CHILDREN)
    done = run(tmp_path, site, WINDOW, [sys.executable, str(tmp_path / "children.py")])
    assert done.returncode == 0, done.stderr[-3000:]
    assert "spawned 0 libcst in a child: False" in done.stdout
    (trace,) = trace_files(tmp_path / "traces")
    assert profiler_steps(trace) == ["ProfilerStep#2", "ProfilerStep#3", "ProfilerStep#4"]
    assert f"_{os.getpid()}." not in os.path.basename(trace)  # written by the spawned child, not this process


def test_a_recipe_that_does_not_fit_stops_the_command_before_it_starts(tmp_path, site):
    marker = tmp_path / "started"
    command = [sys.executable, "-c", f"open({str(marker)!r}, 'w').close()"]
    done = run(tmp_path, site, ["backend=torch"], command, PATCHKIT_ROOT="")
    assert done.returncode == 0 and marker.exists()  # the command itself is fine
    marker.unlink()
    (site / "verl-0.6.1.dist-info").chmod(0o755)
    meta = site / "verl-0.6.1.dist-info" / "METADATA"
    meta.chmod(0o644)
    meta.write_text(meta.read_text().replace("Version: 0.6.1", "Version: 0.9.0"))
    done = run(tmp_path, site, ["backend=torch"], command)  # past the range, every point fits: it runs, and says so
    assert done.returncode == 0 and marker.exists()
    assert "note: verl 0.9.0 is newer than the releases verl-fsdp-update is proven on" in done.stderr
    marker.unlink()
    meta.write_text(meta.read_text().replace("Version: 0.9.0", "Version: 0.2.0"))  # older than the range
    done = run(tmp_path, site, ["backend=torch"], command)
    assert done.returncode == 1 and "0.2.0" in done.stderr and "hint:" in done.stderr
    assert not marker.exists()


def test_a_file_changed_since_the_plan_runs_unpatched_and_says_so(tmp_path, site):
    from patchkit.hook import editfree
    from patchkit.recipe import load as recipe

    env = {"PATCHKIT_HOME": str(tmp_path / "home")}
    old = dict(os.environ)
    os.environ.update(env)
    try:
        settings = recipe.load("verl-fsdp-update", ["backend=torch"])
        spec = editfree.prepare(settings, recipe.read_text(recipe.recipe_path("verl-fsdp-update")), str(site))
        child_env = editfree.environment(spec, dict(os.environ, PYTHONPATH=os.pathsep.join([str(site), str(REPO)])))
    finally:
        os.environ.clear()
        os.environ.update(old)
    check = "import verl.workers.actor.dp_actor as m; print(hasattr(m, '_patchkit_runtime'))"
    patched = subprocess.run([sys.executable, "-c", check], capture_output=True, text=True, env=child_env)
    assert patched.stdout.strip() == "True", patched.stderr
    target = site / DP
    target.chmod(0o644)
    target.write_text(target.read_text() + "\n# edited\n")
    stale = subprocess.run([sys.executable, "-c", check], capture_output=True, text=True, env=child_env)
    assert stale.stdout.strip() == "False" and "is not the file `patchkit run` planned for" in stale.stderr


def test_print_env_gives_what_a_ray_job_s_runtime_env_needs(tmp_path, site):
    done = run(tmp_path, site, ["backend=torch", "--print-env"], [])
    assert done.returncode == 0, done.stderr
    env = json.loads(done.stdout)["env_vars"]
    assert env["PYTHONPATH"].split(os.pathsep)[0].endswith(os.path.join("patchkit", "hook", "_run"))
    assert "verl.workers.actor.dp_actor" in json.loads(env["PATCHKIT_RUN"])["modules"]


def test_without_a_command_it_is_a_usage_error(tmp_path, site):
    env = dict(os.environ, PATCHKIT_HOME=str(tmp_path / "home"))
    done = subprocess.run([sys.executable, "-m", "patchkit", "run", "verl-fsdp-update", "--root", str(site)],
                          capture_output=True, text=True, env=env)
    assert done.returncode == 2 and "give the command to run after --" in done.stderr


def test_a_python_that_ignores_the_hook_is_named_before_it_starts_and_env_i_is_refused(tmp_path, site):
    done = run(tmp_path, site, WINDOW, [sys.executable, "-I", "-c", "print('ran')"])
    assert done.returncode == 0 and done.stdout == "ran\n"
    warning = done.stderr.index("warning: `" + Path(sys.executable).name + " -I`: -I (isolated mode) ignores PYTHONPATH")
    assert warning < done.stderr.index("patching verl.workers.actor.dp_actor in memory")
    assert "hint: drop -I from the command, or profile with the files patched instead" in done.stderr
    refused = run(tmp_path, site, WINDOW, ["env", "-i", sys.executable, "-c", "print('ran')"])
    assert refused.returncode == 1 and refused.stdout == "" and "patching" not in refused.stderr
    assert "error: <command line>: `env -i` starts the command with an empty environment, without PYTHONPATH and " \
           "PATCHKIT_RUN: nothing would be patched or recorded" in refused.stderr


RAY_JOB = textwrap.dedent("""\
    import json, sys
    import ray

    env = json.load(open(sys.argv[1]))
    ray.init(num_cpus=1, include_dashboard=False, runtime_env=env)  # the job's runtime_env: every worker

    @ray.remote
    def probe():
        import sys
        import verl.workers.actor.dp_actor as m
        return hasattr(m, "_patchkit_runtime"), "libcst" in sys.modules

    print("worker:", *ray.get(probe.remote()))
    ray.shutdown()
    """)


def test_on_ray_the_job_s_runtime_env_brings_the_hook_to_every_worker(tmp_path, site):
    pytest.importorskip("ray", reason='Ray is not installed (pip install "patchkit-profiler[ray]")')
    done = run(tmp_path, site, ["backend=torch", "--print-env"], [])
    assert done.returncode == 0, done.stderr
    (tmp_path / "env.json").write_text(done.stdout)
    (tmp_path / "job.py").write_text(RAY_JOB)
    env = dict(os.environ, PATCHKIT_HOME=str(tmp_path / "home"), RAY_USAGE_STATS_ENABLED="0")
    env.pop("PYTHONPATH", None)  # the driver itself is not patched: only what the runtime_env gives the workers
    job = subprocess.run([sys.executable, str(tmp_path / "job.py"), str(tmp_path / "env.json")], capture_output=True,
                         text=True, env=env, cwd=tmp_path, timeout=300)
    assert "worker: True False" in job.stdout, job.stderr[-3000:]


def _announced(line):
    """What `patchkit run` itself says before it becomes COMMAND (cli_run), or a line of patchkit's in the job."""
    return line.startswith("[patchkit]") or line.startswith("verl-fsdp-update: patching ") or line.startswith("note: ")


USER_SITE = textwrap.dedent("""\
    import os, sys
    from patchkit.hook.importhook import Finder
    with open(os.environ["USER_SITE_LOG"], "a") as log:  # the parent `patchkit run` runs it too, without the hook
        log.write(f"user sitecustomize ran, hook installed: {any(isinstance(f, Finder) for f in sys.meta_path)}\\n")
    """)
HELLO = ("import sys, verl.workers.actor.dp_actor as m; "
         "print('hello', hasattr(m, '_patchkit_runtime'), sys.modules['sitecustomize'].__file__)")


@pytest.mark.parametrize("user_site", [False, True], ids=["no-user-sitecustomize", "user-sitecustomize"])
def test_the_child_s_stderr_holds_nothing_but_patchkit_s_own_lines(tmp_path, site, user_site):
    log = tmp_path / "user-site.log"
    extra = {"USER_SITE_LOG": str(log)}
    if user_site:
        (tmp_path / "user").mkdir()
        (tmp_path / "user" / "sitecustomize.py").write_text(USER_SITE)
        extra["PYTHONPATH"] = os.pathsep.join([str(site), str(REPO), str(tmp_path / "user")])
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(site), str(REPO)]), PATCHKIT_HOME=str(tmp_path / "home"))
    env.update(extra)
    env.pop("PATCHKIT_RUN", None)
    done = subprocess.run([sys.executable, "-m", "patchkit", "run", "verl-fsdp-update", "--root", str(site),
                           "backend=torch", "--", sys.executable, "-c", HELLO],
                          capture_output=True, text=True, env=env, cwd=tmp_path, timeout=600)
    assert done.returncode == 0, done.stderr
    # what the same imports say without patchkit (torch warns without numpy, say) is the job's, not patchkit's
    plain = subprocess.run([sys.executable, "-c", "import verl.workers.actor.dp_actor"], capture_output=True,
                           text=True, env=env, cwd=tmp_path, timeout=600)
    assert plain.returncode == 0, plain.stderr
    lines = [line for line in done.stderr.splitlines() if line not in plain.stderr.splitlines()]
    assert [line for line in lines if not _announced(line)] == [], done.stderr
    assert len(lines) == 1 and "patching verl.workers.actor.dp_actor in memory" in lines[0]
    hello, patched, module = done.stdout.split()
    assert (hello, patched) == ("hello", "True")  # the hook is installed in the child either way
    if user_site:
        assert module == str(tmp_path / "user" / "sitecustomize.py")
        assert "user sitecustomize ran, hook installed: True" in log.read_text().splitlines()  # the child's run
    else:
        assert module == os.path.join(HOOK_DIR, "sitecustomize.py")  # the hook's, back in its place
        assert not log.exists()


def test_a_script_recipe_is_refused_before_the_command_starts_with_what_to_use(tmp_path):
    """run instruments modules as they are imported; a script runs as __main__ and is never imported."""
    (tmp_path / "train.py").write_text("open('ran', 'w').write('yes')\n")
    (tmp_path / "ts.yaml").write_text(textwrap.dedent("""\
        id: ts
        description: a script
        target:
          script: train.py
        points:
          - {function: main, at: method_start}
        """))
    env = dict(os.environ, PYTHONPATH=str(REPO))
    for extra in ([], ["--print-env"]):
        done = subprocess.run([sys.executable, "-m", "patchkit", "run", "ts.yaml", *extra, "--", sys.executable,
                               "train.py"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
        assert done.returncode == 1 and done.stdout == "" and not (tmp_path / "ran").exists()
        assert done.stderr.startswith("error: ts.yaml:4:11: ts patches the script train.py, which runs as __main__: "
                                      "`patchkit run` instruments modules as the job imports them"), done.stderr
        assert "hint: patch it with `patchkit apply ts.yaml` (undo: `patchkit revert ts`), or attach to the running " \
               "job with `patchkit attach PID ts.yaml`" in done.stderr
