"""The library's version: the one place it is written (pyproject.toml reads it from here).

It goes on every record the store writes and on every log line, so an operator can tell which
code claimed or finished a run and which wrote a line.
"""

__version__ = "0.17.0"
