# An import that fails at import time.
import numpy_but_faster  # noqa: F401
