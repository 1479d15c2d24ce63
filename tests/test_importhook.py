"""importhook: listed modules load patched from the cache, others untouched; no env, no hook; bad env, one line."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import textwrap

from patchkit import importhook, runcache

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
    sha = hashlib.sha256(mod.read_bytes()).hexdigest()
    cache = tmp_path / "home" / runcache.CACHE
    cache.mkdir(parents=True, exist_ok=True)
    (cache / runcache.cache_name(sha, key)).write_text(patched)
    return {"key": key, "recipe": "", "path": "r.yaml", "overrides": [],
            "modules": {"demo_pkg.mod": {"sha256": sha, "path": str(mod), "points": []}}}


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
