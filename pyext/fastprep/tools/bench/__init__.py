"""`python -m fastprep bench`: loaders side by side on the same data and transform."""

_REPLACED_NAMES = frozenset([
    'FILE_SOURCES', 'NAMES', 'SOURCES', 'SOURCE_LABEL', 'T', 'bench_loader', 'check_sources', 'memcpy_floor_us',
    'run', 'time_per_sample', 'usable_cores',
])


def __getattr__(name: str):
    """fastprep.tools.bench.NAME as before the re-filing (the module this package
    replaced is fastprep.tools.bench.compare)."""
    if name not in _REPLACED_NAMES:  # a submodule not imported yet, or no such name
        raise AttributeError(f"module 'fastprep.tools.bench' has no attribute {name!r}")
    from fastprep.tools.bench import compare  # noqa: PLC0415 (lazy: no cycle through the package)

    return getattr(compare, name)
