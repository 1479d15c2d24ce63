"""A plain, non-editable install ships the recipes, the schema and the demo sample."""

from __future__ import annotations

import subprocess
import sys
import zipfile

from conftest import REPO, RECIPES


def test_wheel_ships_recipes_schema_and_sample_and_lists_them(tmp_path):
    build = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
                            "-w", str(tmp_path / "dist"), str(REPO)], capture_output=True, text=True)
    assert build.returncode == 0, build.stderr
    wheel = next((tmp_path / "dist").glob("patchkit_profiler-*.whl"))
    names = set(zipfile.ZipFile(wheel).namelist())
    for recipe in RECIPES.glob("*.yaml"):
        assert f"patchkit/recipes/{recipe.name}" in names
    assert "patchkit/recipe/recipe.schema.json" in names
    assert "patchkit/demo/sample/verl/workers/actor/dp_actor.py" in names
    assert "patchkit/demo/sample/verl-0.6.1.dist-info/METADATA" in names
    assert not any(n.startswith(("tests/", "fixtures/")) or "/doubles/" in n for n in names)

    target = tmp_path / "site"
    install = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(target),
                              str(wheel)], capture_output=True, text=True)
    assert install.returncode == 0, install.stderr
    listed = subprocess.run([sys.executable, "-c", "import sys; sys.argv = ['patchkit', 'list']; "
                             "import patchkit.cli.commands as c; print(c.__file__, file=sys.stderr); c.main()"],
                            capture_output=True, text=True, cwd=tmp_path, env={"PYTHONPATH": str(target), "PATH": ""})
    assert listed.returncode == 0, listed.stderr
    assert str(target) in listed.stderr
    for rid in ("vllm-ascend-decode", "sglang-forward", "verl-fsdp-logprob", "verl-fsdp-update", "verl-megatron-update"):
        assert rid in listed.stdout
    version = subprocess.run([sys.executable, "-c", "import sys; sys.argv = ['patchkit', '--version']; "
                              "import patchkit.cli.commands as c; c.main()"],
                             capture_output=True, text=True, cwd=tmp_path, env={"PYTHONPATH": str(target), "PATH": ""})
    assert version.returncode == 0, version.stderr
    import patchkit

    assert version.stdout.startswith(f"patchkit-profiler {patchkit.__version__} (import patchkit from {target}")
    # the registry's "patchkit" is someone else's project: this build must not claim that name
    dist_info = [n for n in names if n.endswith(".dist-info/METADATA") and "/" not in n[: -len("/METADATA")]]
    assert dist_info == [f"patchkit_profiler-{patchkit.__version__}.dist-info/METADATA"]
    metadata = zipfile.ZipFile(wheel).read(dist_info[0]).decode()
    assert "\nName: patchkit-profiler\n" in metadata
