"""`python -m fastprep bench`: loaders side by side on the same data and transform (compare), on your
data (data, port), the headline screen (headline), thread sweeps (sweep), the Ray rows and the loader
profile; the pipelines and file sources diagnose measures too."""
