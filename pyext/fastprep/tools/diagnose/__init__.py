"""`python -m fastprep diagnose`: the caching method (bottleneck: find_bottleneck, the sweeps), its
measurements (measure, step_input, stand_ins, raw_loading, run_plan) and its verdict (verdict,
failures, targets); the demo model (demo_model)."""
