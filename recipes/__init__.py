"""Built-in patchkit recipes, one YAML file each; shipped inside the wheel."""
