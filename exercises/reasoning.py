"""Reference and known-wrong variants of the problems that ask the student to reason rather than
transcribe: shared key/value heads in the count of routing distributions, and what one head
can do with two designs at once (the evidence before `two_head_layer`).

Named by problem files (`function:`, `mistakes[].variant`) through course.py.
"""
from __future__ import annotations

import numpy as np

from .reference import count_routing_distributions, softmax

__all__ = ["count_kv_heads"]


def count_kv_heads(num_heads, d_v, num_queries=1, num_keys=None, d_k=None, num_layers=1, batch=1, causal=False,
                   num_kv_heads=None):
    """One distribution per key/value head: the right count with num_kv_heads in place of num_heads."""
    kv_heads = num_heads if num_kv_heads is None else num_kv_heads
    if kv_heads == num_heads:
        raise ValueError("no shared key/value heads: this mistake cannot show")
    return count_routing_distributions(kv_heads, d_v, num_queries, num_keys, d_k, num_layers, batch, causal)
