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
    package = REPO / "patchkit"  # every module of the source tree, the in-job ones included
    missing = [str(p.relative_to(REPO)) for p in package.rglob("*.py") if "__pycache__" not in p.parts
               and p.relative_to(REPO).as_posix() not in names]
    assert not missing, f"not in the wheel (a package left out of pyproject's list?): {missing}"

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


def test_every_package_of_the_source_tree_is_listed_for_the_wheel():
    """pyproject.toml names the packages the wheel ships; a subpackage left out is shipped by some setuptools
    (as package data, with a warning) and not by others: pip's isolated build left patchkit.runtime.attach out."""
    try:
        import tomllib
    except ModuleNotFoundError:  # 3.10
        import tomli as tomllib

    listed = set(tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    package = REPO / "patchkit"
    found = {".".join(p.parent.relative_to(REPO).parts) for p in package.rglob("__init__.py")
             if "sample" not in p.parts}  # the demo's bundled sample is package data, not a package of patchkit's
    assert found - listed == set(), "packages not listed in pyproject.toml's [tool.setuptools] packages"
