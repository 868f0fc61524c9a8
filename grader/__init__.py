"""mha-exercises grader: load problems, run submissions in a sandbox, compare with a reference.

Kept import-light on purpose: `import grader` loads nothing else, so the CLI starts fast and
student code that imports it gets no reference implementation for free. `grader.__version__` is
read from the installed package's metadata (grader/distribution.py) when first asked for.
"""
__all__ = ["__version__"]


def __getattr__(name: str) -> str:
    if name == "__version__":
        from .distribution import version
        return version()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
