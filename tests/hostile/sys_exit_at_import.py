# sys.exit at import time (a SystemExit the import catches).
import sys

sys.exit("no grading today")
