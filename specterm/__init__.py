"""specterm: see what your speculative decoder is doing, token by token."""

__version__ = "0.1.0"
