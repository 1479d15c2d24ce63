"""The folder `patchkit run` puts first on PYTHONPATH: its sitecustomize installs the import hook."""
