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
