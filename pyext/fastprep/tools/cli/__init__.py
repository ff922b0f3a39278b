"""The command line: `python -m fastprep demo | bench | diagnose | pack` (commands: the parser and
main; diagnose, pack_command: the runs behind two of them; arg_types: argparse value types)."""
