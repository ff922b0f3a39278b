"""`python -m fastprep bench`: loaders side by side on the same data and transform (compare), on your
data (data, port), the headline screen (headline), thread sweeps (sweep), the Ray rows and the loader
profile; the pipelines and file sources diagnose measures too."""

from fastprep.core.moved import module_names

# fastprep.tools.bench was a module before the re-filing (now fastprep.tools.bench.compare): its names still read here.
__getattr__ = module_names(__name__, "compare", frozenset([
    'FILE_SOURCES', 'NAMES', 'SOURCES', 'SOURCE_LABEL', 'T', 'bench_loader', 'check_sources', 'memcpy_floor_us',
    'run', 'time_per_sample', 'usable_cores',
]))
