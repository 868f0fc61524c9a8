# SystemExit raised inside a function.
import sys


def count_routing_distributions(*layer):
    sys.exit(0)
