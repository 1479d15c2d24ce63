"""The command line, through click's CliRunner, on fixture trees shaped like the real packages."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from patchkit.cli.commands import main

from conftest import snapshot

DP = "verl/workers/actor/dp_actor.py"


def run(*args, ok=True):
    result = CliRunner().invoke(main, list(args))
    if ok:
        assert result.exit_code == 0, result.output
    return result


def test_list_shows_the_five_seed_recipes():
    out = run("list").output
    for rid in ("vllm-ascend-decode", "sglang-forward", "verl-fsdp-logprob", "verl-fsdp-update", "verl-megatron-update"):
        assert rid in out
    data = json.loads(run("list", "--json").output)
    update = next(r for r in data if r["id"] == "verl-fsdp-update")
    assert update["options"]["granularity"] == {"choices": ["mini", "micro"], "default": "mini"}
    assert update["package"] == "verl" and update["versions"] == ">=0.3,<=0.7.1"


def test_show_prints_settings_inserted_lines_and_notes():
    out = run("show", "verl-fsdp-logprob", "role=ref", "schedule.active=2").output
    assert "option role = ref" in out
    assert "active: 2" in out
    assert '_patchkit_runtime.step("verl-fsdp-logprob/ref", lambda: self.actor_optimizer is None)' in out
    assert "global_profiler.steps: null" in out


def test_diff_prints_a_patch_and_writes_nothing(tree, patchkit_home):
    root = tree("verl-0.6")
    before = snapshot(root)
    result = run("diff", "verl-fsdp-update", "--root", str(root))
    assert result.stdout.startswith(f"--- a/{DP}\n+++ b/{DP}\n")
    added = [ln for ln in result.stdout.splitlines() if ln.startswith("+") and not ln.startswith("+++")]
    assert len(added) == 12 and all("patchkit" in ln for ln in added)  # 10 header lines, start and step
    assert "1 file(s) would change" in result.stderr
    assert snapshot(root) == before
    assert not (patchkit_home / "ledger.json").exists()


def test_apply_twice_status_and_revert_all_restore_the_exact_bytes(tree):
    root = tree("verl-0.6")
    before = snapshot(root)
    target = root / DP
    mode = target.stat().st_mode
    out = run("apply", "verl-fsdp-update", "--root", str(root), "granularity=micro", "schedule.active=2")
    assert "patched:" in out.stderr and "note:" in out.stderr
    patched = target.read_bytes()
    compile(patched, str(target), "exec")
    new_lines = set(patched.decode().splitlines()) - set(before[DP].decode().splitlines())
    assert new_lines and all("patchkit" in ln for ln in new_lines)
    assert target.stat().st_mode == mode

    again = run("apply", "verl-fsdp-update", "--root", str(root), "granularity=micro", "schedule.active=2")
    assert "already applied" in again.stderr
    assert target.read_bytes() == patched

    status = run("status").output
    assert "verl-fsdp-update" in status and "applied" in status and str(target) in status
    data = json.loads(run("status", "--json").output)
    assert data["files"][0]["recipes"]["verl-fsdp-update"]["choices"] == {"granularity": "micro"}
    assert data["files"][0]["state"] == "applied"

    run("revert", "--all")
    assert snapshot(root) == before
    assert "nothing applied" in run("status").output


def test_two_recipes_on_one_file_revert_one_by_one(tree):
    root = tree("verl-0.6")
    before = snapshot(root)
    run("apply", "verl-fsdp-update", "--root", str(root))
    only_update = (root / DP).read_bytes()
    run("apply", "verl-fsdp-logprob", "--root", str(root), "role=ref")
    assert (root / DP).read_bytes() != only_update
    run("revert", "verl-fsdp-logprob")
    assert (root / DP).read_bytes() == only_update
    run("revert", "verl-fsdp-update")
    assert snapshot(root) == before


def test_reapply_with_new_settings_updates_in_place(tree):
    root = tree("verl-0.6")
    before = snapshot(root)
    run("apply", "verl-fsdp-update", "--root", str(root))
    out = run("apply", "verl-fsdp-update", "--root", str(root), "schedule.wait=5")
    assert "updated:" in out.stderr
    assert "wait=5" in (root / DP).read_text()
    run("revert", "--all")
    assert snapshot(root) == before


def test_version_outside_the_range_names_version_range_and_the_recipe_to_use(tree):
    root = tree("verl-0.9")
    before = snapshot(root)
    result = run("apply", "verl-fsdp-update", "--root", str(root), "--strict-versions", ok=False)
    assert result.exit_code == 1
    assert "verl 0.9.1 is installed" in result.stderr and ">=0.3,<=0.7.1" in result.stderr
    assert "verl-engine-update" in result.stderr
    result = run("apply", "verl-fsdp-update", "--root", str(root), ok=False)  # past the range: the files decide
    assert result.exit_code == 1 and "none of the recipe's files" in result.stderr
    assert "use verl-engine-update" in result.stderr
    assert "Traceback" not in result.output
    assert snapshot(root) == before


def test_missing_anchor_points_at_the_target_file_line(tree):
    root = tree("verl-0.6")
    target = root / DP
    text = target.read_text().replace("self._optimizer_step()", "self._optimizer_stepped()")
    target.write_text(text)
    before = snapshot(root)
    result = run("apply", "verl-fsdp-update", "--root", str(root), ok=False)
    assert result.exit_code == 1
    assert f"error: {target}:" in result.stderr
    assert "no statement calling self._optimizer_step in DataParallelPPOActor.update_policy" in result.stderr
    assert "verl 0.6.1" in result.stderr
    assert snapshot(root) == before


def test_errors_have_no_traceback_unless_debug(tree):
    result = run("apply", "no-such-recipe", ok=False)
    assert result.exit_code == 1 and "no built-in recipe 'no-such-recipe'" in result.stderr
    assert "Traceback" not in result.output
    debug = CliRunner().invoke(main, ["--debug", "apply", "no-such-recipe"])
    assert debug.exit_code != 0 and debug.exception is not None


def test_unknown_override_lists_the_valid_keys(tree):
    root = tree("verl-0.6")
    result = run("diff", "verl-fsdp-update", "--root", str(root), "schedule.actve=2", ok=False)
    assert result.exit_code == 1
    assert "unknown override key 'schedule.actve'" in result.stderr
    assert "schedule.active" in result.stderr and "granularity" in result.stderr


def test_package_not_installed_says_how_to_point_at_it():
    result = run("diff", "sglang-forward", ok=False)
    assert result.exit_code == 1
    assert "sglang is not installed in this environment" in result.stderr and "--root" in result.stderr


def test_read_only_target_is_refused_and_nothing_changes(tree, patchkit_home, monkeypatch):
    import os

    root = tree("verl-0.6")
    target = root / DP
    before = snapshot(root)
    real_access = os.access
    monkeypatch.setattr(os, "access", lambda p, mode: False if str(p) == str(target) else real_access(p, mode))
    result = run("apply", "verl-fsdp-update", "--root", str(root), ok=False)
    assert result.exit_code == 1
    assert f"{target}: the file (or its folder) is not writable" in result.stderr
    assert snapshot(root) == before
    assert "nothing applied" in run("status").output


def test_revert_of_something_not_applied_says_so():
    result = run("revert", "verl-fsdp-update", ok=False)
    assert result.exit_code == 1 and "not applied" in result.stderr


def test_revert_with_neither_recipes_nor_all_is_a_usage_error(tree, patchkit_home):
    import patchkit
    from patchkit.core.errors import PatchkitError

    root = tree("verl-0.6")
    run("apply", "verl-fsdp-update", "--root", str(root))
    patched = snapshot(root)
    for extra in ((), ("--force",), ("--root", str(root)), ("--ray", "auto")):
        result = run("revert", *extra, ok=False)
        assert result.exit_code == 2, (extra, result.output)
        assert "Usage:" in result.stderr and "say which recipes to revert, or --all" in result.stderr
        assert "Traceback" not in result.output
    assert snapshot(root) == patched
    with pytest.raises(PatchkitError, match="say which recipes to revert, or --all"):
        patchkit.revert([])


def test_usage_errors_exit_2():
    assert run("apply", ok=False).exit_code == 2
    assert run("diff", "verl-fsdp-update", "--backend", "cuda", ok=False).exit_code == 2


def test_recipe_from_a_file_path(tree, tmp_path):
    from conftest import RECIPES

    root = tree("verl-0.6")
    mine = tmp_path / "my-update.yaml"
    mine.write_text((RECIPES / "verl-fsdp-update.yaml").read_text().replace("id: verl-fsdp-update", "id: my-update"))
    out = run("diff", str(mine), "--root", str(root)).stdout
    assert "# patchkit:my-update" in out


def test_patchkit_test_runs_every_example():
    out = run("test").output
    assert out.strip().splitlines()[-1].endswith(" passed, 0 failed")


# ------------------------------------------------------------------ end to end, in subprocesses

def cli(*args, env=None, cwd=None):
    return subprocess.run([sys.executable, "-m", "patchkit", *args], capture_output=True, text=True, env=env, cwd=cwd)


@pytest.mark.parametrize("tool", ["git", "patch"])
def test_end_to_end_diff_applies_with_git_and_patch_like_apply_does(tree, tmp_path, tool, patchkit_home):
    if shutil.which(tool) is None:
        pytest.fail(f"{tool} is needed for this test")
    import os

    env = dict(os.environ, PATCHKIT_HOME=str(patchkit_home))
    root = tree("verl-0.6")
    copy = tmp_path / "copy"
    shutil.copytree(root, copy)
    diff = cli("diff", "verl-fsdp-update", "granularity=micro", "--root", str(root), env=env)
    assert diff.returncode == 0, diff.stderr
    patch_file = tmp_path / "p.patch"
    patch_file.write_text(diff.stdout)
    if tool == "git":
        done = subprocess.run(["git", "apply", str(patch_file)], cwd=copy, capture_output=True, text=True)
    else:
        done = subprocess.run(["patch", "-p1", "-i", str(patch_file)], cwd=copy, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    applied = cli("apply", "verl-fsdp-update", "granularity=micro", "--root", str(root), env=env)
    assert applied.returncode == 0, applied.stderr
    assert snapshot(copy) == snapshot(root)
    status = cli("status", env=env)
    assert "verl-fsdp-update" in status.stdout
    assert cli("revert", "--all", env=env).returncode == 0
    bad = cli("validate", str(patch_file), env=env)
    assert bad.returncode == 1 and "Traceback" not in bad.stderr


# ------------------------------------------------------------------ what a new user trips on

import os  # noqa: E402

import realwheels  # noqa: E402


def _real_copy(tmp_path, dist, version):
    dest = tmp_path / f"{dist}-{version}"
    shutil.copytree(realwheels.release_root(dist, version), dest)
    return dest


def test_a_failing_command_prints_its_error_first_and_no_notes(tmp_path):
    """verl 0.9.1 has no dp_actor.py: the error comes first, the recipe's notes and the version's note not at all."""
    root = _real_copy(tmp_path, "verl", "0.9.1")
    before = snapshot(root)
    for args in (["apply", "verl-fsdp-update", "--root", str(root)],
                 ["diff", "verl-fsdp-update", "--root", str(root)],
                 ["show", "verl-fsdp-update", "schedule.active=0"]):
        result = run(*args, ok=False)
        assert result.exit_code == 1, args
        assert result.stderr.startswith("error: "), (args, result.stderr)
        assert "note:" not in result.output, args
    assert snapshot(root) == before


def test_apply_prints_the_notes_after_its_outcome_in_a_real_process(tmp_path, patchkit_home):
    root = _real_copy(tmp_path, "verl", "0.4.1")
    env = dict(os.environ, PATCHKIT_HOME=str(patchkit_home))
    failed = cli("apply", "verl-fsdp-update", "--root", str(_real_copy(tmp_path, "verl", "0.8.0")), env=env)
    assert failed.returncode == 1 and failed.stderr.startswith("error: ") and "note:" not in failed.stderr
    done = cli("apply", "verl-fsdp-update", "--root", str(root), env=env)
    assert done.returncode == 0, done.stderr
    lines = done.stderr.splitlines()
    notes = [i for i, line in enumerate(lines) if line.startswith("note: ")]
    summary = next(i for i, line in enumerate(lines) if line.startswith("verl-fsdp-update: 1 file(s) patched"))
    assert lines[0].startswith("patched: ") and notes and min(notes) > summary


def test_show_names_the_candidates_each_release_has_and_reads_none(monkeypatch):
    """show reads no target file: where a release has both candidates, diff picks (worker.py of 0.9.1 is V0's)."""
    worker = Path("vllm_ascend") / "worker"
    for version, there in (("0.9.1", ["worker_v1.py", "worker.py"]), ("0.11.0", ["worker_v1.py"]),
                           ("0.13.0", ["worker.py"])):
        root = realwheels.release_root("vllm-ascend", version)
        out = run("show", "vllm-ascend-decode", "--root", str(root)).output
        line = next(ln for ln in out.splitlines() if ln.startswith("patches:"))
        paths = [str((root / worker / name).resolve()) for name in there]
        named = paths[0] if len(paths) == 1 else f"the first of {' and '.join(paths)} where every point resolves"
        assert line.startswith(f"patches:  {named}"), version
        assert f"(vllm-ascend {version}, from vllm-ascend metadata in {root.resolve()})" in out
    picked = run("diff", "vllm-ascend-decode", "--root", str(realwheels.release_root("vllm-ascend", "0.9.1")))
    assert "+++ b/vllm_ascend/worker/worker_v1.py" in picked.output


def test_show_says_why_no_file_is_shown(tmp_path):
    refused = run("show", "verl-fsdp-update", "--root", str(realwheels.release_root("verl", "0.9.1"))).output
    assert "patches:  no file shown: none of the recipe's files is in" in refused and "(verl 0.9.1)" in refused
    assert "hint: use verl-engine-update" in refused
    assert "schedule.wait: 0" in refused  # the rest of show is still there
    missing = run("show", "verl-fsdp-update", "--root", str(tmp_path)).output
    assert f"patches:  no file shown: no package verl under {tmp_path.resolve()}" in missing
    here = run("show", "sglang-forward").output
    assert "patches:  no file shown: sglang is not installed in this environment" in here


def test_show_looks_in_this_environment_and_parses_nothing_when_the_package_is_missing(monkeypatch):
    import patchkit

    with monkeypatch.context() as blocked:  # any import of the engine or libcst now fails
        blocked.setitem(sys.modules, "libcst", None)
        blocked.setitem(sys.modules, "patchkit.engine.codemod", None)
        blocked.delattr(patchkit, "engine", raising=False)
        assert run("diff", "vllm-ascend-decode", "--root", str(realwheels.release_root("vllm-ascend", "0.23.0")),
                   ok=False).exit_code != 0  # the block works
        out = run("show", "vllm-ascend-decode").output
        assert "patches:  no file shown: vllm_ascend is not installed in this environment" in out
    root = realwheels.release_root("sglang", "0.5.23")
    monkeypatch.syspath_prepend(str(root))
    out = run("show", "sglang-forward").output
    assert f"patches:  {(root / 'sglang/srt/model_executor/model_runner.py').resolve()}" in out


def test_list_aligns_every_column():
    lines = run("list").output.splitlines()
    recipes = json.loads(run("list", "--json").output)
    assert len(lines) == len(recipes) > 2
    assert len({len(f"{r['distribution']} {r['versions']}") for r in recipes}) > 1  # ranges of several widths
    second, third = set(), set()
    for line, r in zip(lines, recipes):
        package = f"{r['distribution']} {r['versions']}"
        assert line.startswith(r["id"] + "  ")
        start = line.index(package, len(r["id"]))
        second.add(start)
        rest = line[start + len(package):]
        third.add(start + len(package) + len(rest) - len(rest.lstrip(" ")))
        assert len(rest) - len(rest.lstrip(" ")) >= 2
    assert len(second) == 1 and len(third) == 1, lines


@pytest.mark.parametrize("command", ["show", "diff", "apply"])
def test_every_command_taking_overrides_says_what_they_are(command):
    out = run(command, "--help").output
    assert f"Usage: main {command} [OPTIONS] RECIPE [KEY=VALUE]..." in out
    text = " ".join(out.split())
    assert "KEY=VALUE: dotted recipe settings, values read as YAML: schedule.wait=2 profiler.level=level1" in text
    assert "granularity=micro" in text and "`patchkit show RECIPE` lists a recipe's keys and options" in text


def test_show_lists_the_keys_as_they_are_typed():
    out = run("show", "verl-fsdp-update", "profiler.contents=[npu]", "schedule.wait=3").output
    lines = out.splitlines()
    for line in ("  profiler.contents: [npu]", "  schedule.wait: 3", "  profiler.analysis: true"):
        assert line in lines
    assert any(ln.startswith("option granularity = mini  (choices: mini, micro)") for ln in lines)


@pytest.mark.parametrize("package,distribution", [("click", "click"), ("yaml", "pyyaml"), ("libcst", "libcst"),
                                                  ("git", "gitpython"), ("patchkit", "patchkit-profiler")])
def test_apply_warns_when_the_target_is_patchkits_own_dependency(tmp_path, package, distribution):
    root = tmp_path / "site"
    (root / package).mkdir(parents=True)
    (root / package / "core.py").write_text("class Command:\n    def main(self):\n        return 1\n")
    recipe = tmp_path / "probe.yaml"
    recipe.write_text(f"id: probe\ndescription: d\ntarget: {{package: {package}, files: [{package}/core.py]}}\n"
                      "backend: torch\npoints: [{class: Command, method: main, at: method_start}]\n")
    result = run("apply", str(recipe), "--root", str(root))
    warnings = [ln for ln in result.stderr.splitlines() if ln.startswith("warning: ")]
    assert len(warnings) == 1 and f"{package} ({distribution})" in warnings[0] and "profiles patchkit itself" in warnings[0]
    assert b"patchkit" in (root / package / "core.py").read_bytes()  # a warning, not a refusal


def test_apply_to_a_training_package_gives_no_such_warning(tree):
    assert "own code or one of its dependencies" not in run("apply", "verl-fsdp-update", "--root", str(tree("verl-0.6"))).stderr


def test_every_command_is_declared_beside_what_it_says_and_attached_one_way():
    """Each cli module declares its commands; commands.py names every one of them in COMMANDS (module:attribute,
    loaded when asked for) and declares none itself; --ray is always the one decorator's (no command reads the
    address itself)."""
    import ast
    import importlib
    from pathlib import Path

    import click

    from patchkit.cli import commands

    folder = Path(commands.__file__).parent
    declared = {}
    for path in sorted(folder.glob("*.py")):
        module = importlib.import_module(f"patchkit.cli.{path.stem}")
        declared.update({value.name: value for value in vars(module).values()
                         if isinstance(value, click.Command) and value is not main})
        text = path.read_text(encoding="utf-8")
        calls = {n.func.attr for n in ast.walk(ast.parse(text)) if isinstance(n, ast.Call)
                 and isinstance(n.func, ast.Attribute)}
        assert "add_command" not in calls, f"{path.name} attaches a command itself"
        if path.name != "options.py":
            assert "ray_address" not in text, f"{path.name} reads --ray itself instead of through ray_option"
    every = commands.every_command()
    assert set(commands.COMMANDS) == set(declared) and every == declared
    for name, (where, _summary) in commands.COMMANDS.items():
        module, _, attribute = where.partition(":")
        assert getattr(importlib.import_module(module), attribute) is declared[name]
    assert not [v for v in vars(commands).values() if isinstance(v, click.Command) and v is not main]
    ray = {name: [p for p in command.params if "--ray" in p.opts] for name, command in every.items()}
    assert {name for name, found in ray.items() if found} == {"diff", "apply", "revert", "status", "traces",
                                                             "collect", "capture", "attach"}
    assert {(p.metavar, p.name) for found in ray.values() for p in found} == {("ADDRESS", "ray_address")}


@pytest.mark.parametrize("limit", [20, 45, 74, 200])
def test_the_line_help_lists_a_command_with_is_the_command_s_own(limit):
    """`patchkit --help` shortens COMMANDS' summary, not the command's help (its module is not imported): the
    two say the same at any width."""
    import click

    from patchkit.cli import commands

    for name, command in commands.every_command().items():
        summary = click.Command(name, help=commands.COMMANDS[name][1])
        assert summary.get_short_help_str(limit) == command.get_short_help_str(limit), name
        assert " ".join(command.help.split("\n\n")[0].split()) == commands.COMMANDS[name][1], name


@pytest.mark.parametrize("width", [50, 80, 160])
def test_help_lists_every_command_as_if_each_were_loaded(width):
    import click

    from patchkit.cli import commands

    eager = click.Group("main", commands=commands.every_command(), params=main.params, help=main.help,
                        context_settings=main.context_settings)
    lazy, loaded = (CliRunner().invoke(group, ["--help"], terminal_width=width, max_content_width=width).output
                    for group in (main, eager))
    assert lazy == loaded and all(f"  {name} " in lazy for name in commands.COMMANDS)


def test_help_and_a_command_import_only_the_modules_of_that_command():
    """`patchkit --help` imports no command's module; `patchkit status` and `validate` import the one declaring
    it (nothing for analysis, attach, authoring, capture or run)."""
    from patchkit.cli.commands import COMMANDS

    declaring = sorted({where.partition(":")[0] for where, _summary in COMMANDS.values()})
    code = ("import sys; sys.argv = ['patchkit'] + sys.argv[1:]; import patchkit.cli.commands as c\n"
            "try:\n    c.main()\nexcept SystemExit:\n    pass\n"
            f"print(sorted(set({declaring!r}) & set(sys.modules)), file=sys.stderr)")

    def loaded(*args):
        out = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, check=True)
        return out.stderr.splitlines()[-1]

    assert len(declaring) > 5 and loaded("--help") == "[]"
    assert loaded("status", "--help") == "['patchkit.cli.patch']"
    assert loaded("validate", "--help") == loaded("show", "--help") == "['patchkit.cli.recipes']"


REPO = Path(__file__).resolve().parent.parent
# What each command timed by bench/startup.py must not import: what it does not use (the codemod, the other
# commands' modules, the catalogue's cache and json for a recipe read in full, the writer's tempfile, the state
# folder's access, git, error formatting for a command that succeeds).
NOT_IMPORTED = {
    ("--help",): ("patchkit.recipe", "patchkit.state", "patchkit.runtime", "patchkit.core.printable", "json"),
    ("list",): ("patchkit.recipe.load", "patchkit.recipe.kinds", "patchkit.runtime", "packaging", "socket",
                "patchkit.core.manifest", "patchkit.core.printable"),
    ("status",): ("patchkit.recipe.load", "patchkit.cli.recipes", "packaging", "tempfile", "socket", "shutil", "random",
                  "patchkit.core.manifest"),
    ("validate", str(REPO / "recipes" / "verl-fsdp-update.yaml")): (
        "patchkit.recipe.catalogue", "patchkit.state", "patchkit.engine", "patchkit.core.printable",
        "patchkit.core.private", "json", "libcst"),
    ("show", "verl-fsdp-update", "--root", str(REPO / "fixtures" / "verl-0.6")): (
        "patchkit.engine.marks", "patchkit.engine.codemod", "patchkit.state.gitrepo", "patchkit.state.ledger",
        "patchkit.core.printable", "patchkit.core.private", "json", "libcst", "git"),
}


@pytest.mark.parametrize("args", list(NOT_IMPORTED), ids=[args[0] for args in NOT_IMPORTED])
def test_a_command_imports_nothing_it_does_not_use(args, tmp_path):
    code = ("import sys; sys.argv = ['patchkit'] + sys.argv[1:]\nimport patchkit.cli.commands as c\n"
            "try:\n    c.main()\nexcept SystemExit as exc:\n    assert not exc.code, exc.code\n"
            "print(' '.join(sorted(sys.modules)), file=sys.stderr)")
    done = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True,
                          env={"PATCHKIT_HOME": str(tmp_path / "home"), "PATH": "/usr/bin:/bin",
                               "PYTHONPATH": str(REPO)})
    assert done.returncode == 0, done.stderr
    loaded = done.stderr.splitlines()[-1].split()
    unwanted = NOT_IMPORTED[args]
    assert not [m for m in loaded if m in unwanted or m.startswith(tuple(u + "." for u in unwanted))]


@pytest.mark.parametrize("typed,meant", [("analyze", "analyse"), ("Analyze", "analyse"), ("stauts", "status"),
                                         ("revrt", "revert"), ("trace", "traces")])
def test_a_mistyped_command_gets_did_you_mean_among_every_command(typed, meant):
    """The group loads a command only when asked, so click's own guess saw none (msprof-analyze spells analyze
    with a z): before, `No such command 'analyze'.` and nothing more."""
    result = run(typed, ok=False)
    assert result.exit_code == 2
    assert f"Error: No such command '{typed}'. Did you mean '{meant}'" in result.output


def test_an_unknown_command_far_from_any_is_said_without_a_guess():
    result = run("xyzzy", ok=False)
    assert result.exit_code == 2 and result.output.rstrip().endswith("Error: No such command 'xyzzy'.")


def test_version_names_the_package_folder_patchkit_is_imported_from():
    import patchkit

    out = run("--version").output
    assert out == f"patchkit-profiler {patchkit.__version__} (import patchkit from " \
                  f"{Path(patchkit.__file__).resolve().parent})\n"  # before: .../patchkit/cli
