# os._exit at import time: nothing can be graded, and the report says why.
import os

os._exit(3)
