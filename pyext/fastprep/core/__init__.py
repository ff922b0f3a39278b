"""The foundations every layer uses: argument checks (args), the sample tree (tree), field roles (roles),
which devices and decoders can be used (devices), the counter generator and seeds (counter_rng, rng),
progress, iterator stopping (iterators) and the bad-sample policy (bad_samples). Imports nothing of
fastprep above it but fastprep.errors (its exceptions and warnings, beside it at the bottom)."""
