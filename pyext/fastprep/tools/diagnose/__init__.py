"""`python -m fastprep diagnose`: the caching method (bottleneck: find_bottleneck, the sweeps' use),
how it finds raw loading (raw_loading), its verdict (verdict, failures, targets) and the demo model
(demo_model). What it measures with is tools.measuring, shared with tools.bench."""

from fastprep.tools.diagnose._bottleneck import find_bottleneck
from fastprep.tools.diagnose._verdict import BottleneckReport

__all__ = ["BottleneckReport", "find_bottleneck"]
