"""mha-exercises grader: load problems, run submissions in a sandbox, compare with a reference.

Kept import-light on purpose: `import grader` loads nothing else, so the CLI starts fast and
student code that imports it gets no reference implementation for free.
"""
__all__ = ["__version__"]
__version__ = "0.1.0"
