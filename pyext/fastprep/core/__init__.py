"""The foundations every layer uses: argument checks (args), the sample tree (tree), field roles (roles),
which devices and decoders can be used (devices), the counter generator and seeds (counter_rng, rng),
progress, iterator stopping (iterators), the bad-sample policy (bad_samples) and fastprep's warning
classes (warning_types). Imports nothing of fastprep above it."""
