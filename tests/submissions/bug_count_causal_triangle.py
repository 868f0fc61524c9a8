# count_routing_distributions: n(n+1)/2 under the causal mask
def count_routing_distributions(num_heads, d_v, num_queries=1, num_keys=None, d_k=None, num_layers=1,
                                batch=1, causal=False):
    per_head = num_queries * (num_queries + 1) // 2 if causal else num_queries
    return num_layers * batch * num_heads * per_head
