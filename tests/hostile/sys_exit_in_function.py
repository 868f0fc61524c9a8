# SystemExit raised inside a function.
import sys


def count_routing_distributions(num_heads, d_v, num_queries=1):
    sys.exit(0)
