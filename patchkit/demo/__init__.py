"""The bundled demo: a verl-shaped sample (``sample/``) and a CPU training script (``train``)."""

import os

SAMPLE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "sample")
"""The sample tree, shaped like site-packages: ``verl/...`` and ``verl-0.6.1.dist-info``."""
