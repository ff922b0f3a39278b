"""`python -m fastprep diagnose`: the caching method, its measurements and its verdict."""

_REPLACED_NAMES = frozenset([
    'ADVICE', 'BottleneckReport', 'CompactBatch', 'Epochs', 'LEVELS', 'Level', 'PHASE_NOTE', 'Plan', 'STAGES',
    'STEADY', 'Settings', 'Source', 'Stats', 'SweepReport', 'check_device', 'decoder', 'facts_of',
    'find_bottleneck', 'is_fastprep_loader', 'judge', 'more_data', 'move_to', 'own', 'rm', 'round_adjusted',
    'si', 'split_dataset', 'stop_iterator', 'sweep', 'sweep_loader', 'sweep_threads', 'synchronize',
])


def __getattr__(name: str):
    """fastprep.tools.diagnose.NAME as before the re-filing (the module this package
    replaced is fastprep.tools.diagnose.bottleneck)."""
    if name not in _REPLACED_NAMES:  # a submodule not imported yet, or no such name
        raise AttributeError(f"module 'fastprep.tools.diagnose' has no attribute {name!r}")
    from fastprep.tools.diagnose import bottleneck  # noqa: PLC0415 (lazy: no cycle through the package)

    return getattr(bottleneck, name)
