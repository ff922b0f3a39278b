"""What the sweeps (tools.bench) and the caching method (tools.diagnose) both measure with: timed
steps (measure), what a step receives (step_input), the stand-in datasets and loaders (stand_ins),
the progress of a run (run_plan), and the one-line error for what the user gave (usage). Below
both: neither imports the other through it."""
