"""The error for what the user gave a tool (a command line, a target, a file to write)."""

from __future__ import annotations


class UsageError(Exception):
    """A problem with the command line or the target: printed as one line, exit status 2."""
