"""importhook: listed modules load patched from the cache, others untouched; no env, no hook; bad env, one line."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import textwrap

from patchkit.hook import importhook
from patchkit.hook import runcache

HOOK_DIR = os.path.join(os.path.dirname(importhook.__file__), "_run")


def _package(tmp_path, text="VALUE = 1\n"):
    pkg = tmp_path / "site" / "demo_pkg"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "mod.py").write_text(text)
    return pkg / "mod.py"


def _env(tmp_path, spec, **extra):
    repo = os.path.dirname(os.path.dirname(importhook.__file__))
    return dict(os.environ, PYTHONPATH=os.pathsep.join([HOOK_DIR, str(tmp_path / "site"), repo]),
                PATCHKIT_HOME=str(tmp_path / "home"), PATCHKIT_RUN=json.dumps(spec), **extra)


def _spec(tmp_path, mod, patched, key="k1"):
    """What the planning process passes down: the source's sha256 and the sha256 of the patched text it cached."""
    sha = hashlib.sha256(mod.read_bytes()).hexdigest()
    cache = tmp_path / "home" / runcache.CACHE
    cache.mkdir(parents=True, exist_ok=True)
    (cache / runcache.cache_name(sha, key)).write_text(patched)
    return {"key": key, "recipe": "", "path": "r.yaml", "overrides": [],
            "modules": {"demo_pkg.mod": {"sha256": sha, "patched_sha256": runcache.text_sha256(patched),
                                         "path": str(mod), "points": []}}}


def _entry(tmp_path, spec):
    (module,) = spec["modules"].values()
    return tmp_path / "home" / runcache.CACHE / runcache.cache_name(module["sha256"], spec["key"])


CHECK = "import demo_pkg.mod as m, demo_pkg; print(m.VALUE, m.__file__.endswith('mod.py'), hasattr(demo_pkg, 'VALUE'))"


def test_a_listed_module_is_compiled_from_the_cache_under_its_own_file_name(tmp_path):
    mod = _package(tmp_path)
    spec = _spec(tmp_path, mod, "VALUE = 2  # patchkit:r\n")
    done = subprocess.run([sys.executable, "-c", CHECK], capture_output=True, text=True, env=_env(tmp_path, spec))
    assert done.stdout.split() == ["2", "True", "False"], done.stderr
    raised = subprocess.run([sys.executable, "-c", "import demo_pkg.mod"], capture_output=True, text=True,
                            env=_env(tmp_path, _spec(tmp_path, mod, "raise ValueError('x')  # patchkit:r\n", "k2")))
    assert f'File "{mod}", line 1' in raised.stderr  # tracebacks name the real file


def test_without_the_variable_nothing_is_installed_and_a_bad_one_is_one_line(tmp_path):
    assert importhook.install({}) is False
    mod = _package(tmp_path)
    env = _env(tmp_path, {})
    env["PATCHKIT_RUN"] = "{not json"
    done = subprocess.run([sys.executable, "-c", CHECK], capture_output=True, text=True, env=env)
    assert done.stdout.split() == ["1", "True", "False"]
    assert done.stderr.count("[patchkit] run: $PATCHKIT_RUN cannot be read") == 1
    assert mod.read_text() == "VALUE = 1\n"


def test_the_user_s_own_sitecustomize_still_runs(tmp_path):
    mod = _package(tmp_path)
    (tmp_path / "site" / "sitecustomize.py").write_text("import builtins\nbuiltins.USER_SITE_RAN = True\n")
    spec = _spec(tmp_path, mod, "VALUE = 3  # patchkit:r\n")
    code = CHECK + "; import builtins; print(getattr(builtins, 'USER_SITE_RAN', False))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=_env(tmp_path, spec))
    assert done.stdout.split() == ["3", "True", "False", "True"], done.stderr


def test_a_cache_entry_that_cannot_be_made_leaves_the_module_unpatched(tmp_path):
    mod = _package(tmp_path, textwrap.dedent("VALUE = 1\n"))
    spec = _spec(tmp_path, mod, "VALUE = 2\n")
    for entry in (tmp_path / "home" / runcache.CACHE).iterdir():
        entry.unlink()  # as on a node that has no cache: rebuilt from the recipe, which here is not one
    done = subprocess.run([sys.executable, "-c", CHECK], capture_output=True, text=True, env=_env(tmp_path, spec))
    assert done.stdout.split()[0] == "1" and "it runs without profiling" in done.stderr


def _hook_lines(stderr):
    return [line for line in stderr.splitlines() if line.startswith("[patchkit] run:")]


def test_a_replaced_cache_entry_is_never_executed_and_the_module_runs_unpatched(tmp_path):
    mod = _package(tmp_path)
    spec = _spec(tmp_path, mod, "VALUE = 2  # patchkit:r\n")
    marker = tmp_path / "executed"
    planted = f"open({str(marker)!r}, 'w').close()\nVALUE = 666  # patchkit:r\n"
    _entry(tmp_path, spec).write_text(planted)  # another user's (or a stale) text where the planned one was
    done = subprocess.run([sys.executable, "-c", CHECK], capture_output=True, text=True, env=_env(tmp_path, spec))
    assert done.returncode == 0 and done.stdout.split() == ["1", "True", "False"], done.stderr
    assert not marker.exists()
    (line,) = _hook_lines(done.stderr)
    assert "is not the one `patchkit run` planned" in line and str(mod) in line
    assert done.stderr.splitlines() == [line]  # one line, nothing else


def test_a_text_no_hash_was_recorded_for_is_not_executed(tmp_path):
    mod = _package(tmp_path)
    marker = tmp_path / "executed"
    spec = _spec(tmp_path, mod, f"open({str(marker)!r}, 'w').close()  # patchkit:r\n")
    del spec["modules"]["demo_pkg.mod"]["patched_sha256"]  # a PATCHKIT_RUN written by hand, or by an older patchkit
    done = subprocess.run([sys.executable, "-c", CHECK], capture_output=True, text=True, env=_env(tmp_path, spec))
    assert done.stdout.split() == ["1", "True", "False"] and not marker.exists()
    (line,) = _hook_lines(done.stderr)
    assert "records no sha256 of its patched text" in line


def test_a_fifo_in_place_of_the_entry_does_not_hang_the_process(tmp_path):
    mod = _package(tmp_path)
    spec = _spec(tmp_path, mod, "VALUE = 2  # patchkit:r\n")
    entry = _entry(tmp_path, spec)
    entry.unlink()
    os.mkfifo(entry)
    done = subprocess.run([sys.executable, "-c", CHECK], capture_output=True, text=True, env=_env(tmp_path, spec),
                          timeout=60)
    assert done.stdout.split() == ["1", "True", "False"]
    (line,) = _hook_lines(done.stderr)
    assert "not a plain file" in line and "it runs without profiling" in line


def test_with_no_sitecustomize_of_the_user_s_the_hook_s_stays_imported_and_nothing_is_said(tmp_path):
    mod = _package(tmp_path)
    spec = _spec(tmp_path, mod, "VALUE = 2  # patchkit:r\n")
    code = CHECK + "; import sys; print(sys.modules['sitecustomize'].__file__)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=_env(tmp_path, spec))
    assert done.stderr == ""
    assert done.stdout.split() == ["2", "True", "False", os.path.join(HOOK_DIR, "sitecustomize.py")]


def test_a_failing_sitecustomize_of_the_user_s_is_reported_as_python_reports_it_and_the_hook_stays(tmp_path):
    mod = _package(tmp_path)
    (tmp_path / "site" / "sitecustomize.py").write_text("raise ValueError('the user s own')\n")
    spec = _spec(tmp_path, mod, "VALUE = 2  # patchkit:r\n")
    done = subprocess.run([sys.executable, "-c", CHECK], capture_output=True, text=True, env=_env(tmp_path, spec))
    plain = subprocess.run([sys.executable, "-c", "pass"], capture_output=True, text=True,
                           env=dict(os.environ, PYTHONPATH=str(tmp_path / "site")))
    assert "ValueError: the user s own" in plain.stderr  # what Python says without patchkit ...
    assert done.stderr == plain.stderr  # ... is all it says with it
    assert done.stdout.split() == ["2", "True", "False"]  # and the hook was installed before
