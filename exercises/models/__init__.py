"""Tiny trained attention-only transformers for the exercises: the model and its files (model.py),
the script that trained them (train.py) and the analysis of their heads (analysis.py). numpy only."""
