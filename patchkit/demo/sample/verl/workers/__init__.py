"""patchkit demo sample: verl.workers (stand-in)."""
