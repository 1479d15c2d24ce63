from patchkit.cli.main import main

main(prog_name="patchkit")
