"""The command line: `python -m fastprep pack | bench | diagnose`."""

_REPLACED_NAMES = frozenset([
    'BENCH_HELP', 'DIAGNOSE_HELP', 'TABLE_OPTIONS', 'bench', 'build_parser', 'count', 'demo', 'fraction',
    'int_list', 'main', 'number', 'positive',
])


def __getattr__(name: str):
    """fastprep.tools.cli.NAME as before the re-filing (the module this package
    replaced is fastprep.tools.cli.commands)."""
    if name not in _REPLACED_NAMES:  # a submodule not imported yet, or no such name
        raise AttributeError(f"module 'fastprep.tools.cli' has no attribute {name!r}")
    from fastprep.tools.cli import commands  # noqa: PLC0415 (lazy: no cycle through the package)

    return getattr(commands, name)
