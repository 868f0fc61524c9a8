# count_routing_distributions: one layer of one sequence
def count_routing_distributions(num_heads, d_v, num_queries=1, num_keys=None, d_k=None, num_layers=1,
                                batch=1, causal=False):
    # each head normalizes one row per query
    return num_heads * num_queries
