"""The test suite. Imported before its conftest.py, so this runs before numpy loads.

Each test process uses one BLAS thread, as `mha` itself does (grader/cli/launch.py), unless the
environment sets another count: pytest-xdist's workers (two on two cores) inherit it, instead of
each running BLAS threads that only compete for the same cores.
"""
import os

for _variable in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_variable, "1")
