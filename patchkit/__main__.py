from patchkit.cli.commands import main

main(prog_name="patchkit")
