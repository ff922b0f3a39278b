"""`python -m fastprep diagnose`: the caching method, its measurements and its verdict."""

from fastprep.core.moved import module_names

# fastprep.tools.diagnose was a module before the re-filing (now .bottleneck): its names still read here.
__getattr__ = module_names(__name__, "bottleneck", frozenset([
    'ADVICE', 'BottleneckReport', 'CompactBatch', 'Epochs', 'LEVELS', 'Level', 'PHASE_NOTE', 'Plan', 'STAGES',
    'STEADY', 'Settings', 'Source', 'Stats', 'SweepReport', 'check_device', 'decoder', 'facts_of',
    'find_bottleneck', 'is_fastprep_loader', 'judge', 'more_data', 'move_to', 'own', 'rm', 'round_adjusted',
    'si', 'split_dataset', 'stop_iterator', 'sweep', 'sweep_loader', 'sweep_threads', 'synchronize',
]))
