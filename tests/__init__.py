"""The test suite. Imported before its conftest.py, so this runs before numpy loads.

Each test process uses one BLAS thread, as `mha` itself does (grader/cli/launch.py), unless the
environment sets another count: pytest-xdist's workers (four on two cores) inherit it, instead of
each running BLAS threads that only compete for the same cores.

pytest rewrites the asserts of every test module, and of the package that provides a pytest
plugin (this one, `grader` and `exercises`): some 300 modules. It keeps what it rewrote beside
each module, unless bytecode writing is off (PYTHONDONTWRITEBYTECODE, which many container images
set); then every pytest process rewrites all of them again, about 8 s of CPU each. The test
processes keep them, as they do wherever that variable is not set. The processes the suite
starts keep the environment's setting (conftest.py's `byte_compile_checkout` compiles the
checkout for them).
"""
import os
import sys

for _variable in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_variable, "1")
sys.dont_write_bytecode = False
