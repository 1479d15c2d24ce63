"""A small training loop of a user's own, in plain Python."""
