"""The foundations every layer uses: argument checks, the sample tree, field roles, the counter generator
and seeds, progress, iterator stopping, the bad-sample policy. Imports nothing of fastprep above it."""
