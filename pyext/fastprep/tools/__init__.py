"""fastprep's tooling, apart from the library: the benchmark (`python -m fastprep bench`), the
starvation diagnosis (`python -m fastprep diagnose`, :mod:`fastprep.tools.diagnose._bottleneck`), the target
pipelines both measure, a demo model and plotting. The library never imports from here."""
