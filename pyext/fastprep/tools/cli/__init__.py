"""The command line: `python -m fastprep demo | bench | diagnose | pack`."""

from fastprep.core.moved import module_names

# fastprep.tools.cli was a module before the re-filing (now fastprep.tools.cli.commands): its names still read here.
__getattr__ = module_names(__name__, "commands", frozenset([
    'BENCH_HELP', 'DIAGNOSE_HELP', 'TABLE_OPTIONS', 'bench', 'build_parser', 'count', 'demo', 'fraction',
    'int_list', 'main', 'number', 'positive',
]))
