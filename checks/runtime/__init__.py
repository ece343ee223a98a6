"""Code that also runs inside the candidate's interpreter: stdlib and NumPy only.

The worker process is started as ``python checks/runtime/worker.py``, so these modules must
import each other both as a package (in the engine) and as top-level modules (in the
worker). Nothing here may import Hypothesis, the ``checks`` package or the reference.
"""
