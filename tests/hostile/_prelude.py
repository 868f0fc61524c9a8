# Appended to the model solution before every hostile snippet (see tests/test_hostile.py).
# TOKEN is unique per test run: every process the submission starts inherits the name hxTOKEN
# (or has TOKEN in its command line), and every file it writes has TOKEN in its name or text,
# so the test can find leftovers without confusing them with anything else on the machine.
import ctypes as _ctypes

TOKEN = "@TOKEN@"
TAG = "mha-hostile-" + TOKEN
_ctypes.CDLL(None).prctl(15, ("hx" + TOKEN).encode(), 0, 0, 0)  # PR_SET_NAME
