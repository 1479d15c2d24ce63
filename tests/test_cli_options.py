"""cli.options: the options several commands share, and what each hands the command."""

from __future__ import annotations

import click
from click.testing import CliRunner

from patchkit.cli.options import complete_applied, complete_recipes, version_options


@click.command()
@version_options
def probe(versions) -> None:
    click.echo(repr(versions))


def test_the_version_options_hand_the_command_skip_and_strict_or_none_for_the_environment():
    said = {args: CliRunner().invoke(probe, list(args)).output.strip() for args in
            [(), ("--strict-versions",), ("--skip-version-check",), ("--skip-version-check", "--strict-versions")]}
    assert said == {(): "(False, None)", ("--strict-versions",): "(False, True)",
                    ("--skip-version-check",): "(True, None)",
                    ("--skip-version-check", "--strict-versions"): "(True, True)"}
    assert "--strict-versions" in CliRunner().invoke(probe, ["--help"]).output


def test_completion_offers_built_in_recipes_and_files_and_never_fails():
    assert [c.value for c in complete_recipes(None, None, "vllm-")] == ["vllm-ascend-decode", "vllm-decode"]
    assert complete_recipes(None, None, "./mine.yaml")[0].type == "file"
    assert complete_applied(None, None, "") == []  # an empty ledger in this test's home


def test_ray_runs_the_cluster_function_with_the_command_s_arguments_and_refuses_what_means_nothing_there():
    from patchkit.cli.options import ray_option

    seen = []

    def everywhere(address, name, force, versions):
        seen.append(("cluster", address, name, versions))

    @click.command()
    @click.argument("name")
    @click.option("--force", is_flag=True)
    @click.option("--commit", is_flag=True)
    @version_options
    @ray_option(everywhere, refuse=("commit",))
    def probe_ray(name, force, commit, versions):
        seen.append(("here", name, force, commit, versions))

    assert CliRunner().invoke(probe_ray, ["x", "--commit"]).exit_code == 0
    assert CliRunner().invoke(probe_ray, ["x", "--ray", "auto", "--strict-versions"]).exit_code == 0
    assert seen == [("here", "x", False, True, (False, None)), ("cluster", "auto", "x", (False, True))]
    refused = CliRunner().invoke(probe_ray, ["x", "--ray", "auto", "--commit"])
    assert refused.exit_code == 2 and "--commit is not available with --ray" in refused.output
    assert "--ray ADDRESS" in CliRunner().invoke(probe_ray, ["--help"]).output
