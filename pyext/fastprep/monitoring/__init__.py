"""Watching a real training loop for input starvation: ``fastprep.monitor(loader)``.

- _loop.py: the Monitor (the wrapper around the loop, its passes and its summary);
- _stats.py: per-step waits and step times in constant memory (sums, log histograms);
- _events.py: step times on a CUDA device from events on the loop's stream, read steps late;
- _samplers.py: GPU (NVML) and CPU utilisation on a daemon thread;
- _live.py: the live line (tqdm postfix or log lines) and TensorBoard scalars;
- _summary.py: the summary: its numbers, and which advice applies;
- _pipeline.py: what the pipeline is (steps, source, loader), read from the objects in front of it;
  _steps.py: its transform's steps;
- _remedies.py: the remedy table keyed by it (python -m fastprep diagnose advises from it too);
- _advice.py: the words of every piece of advice, once (diagnose's verdict, its remedies and the
  summary all read them).
"""

from fastprep.monitoring._loop import Monitor, monitor
from fastprep.monitoring._pipeline import PipelineFacts, facts_of
from fastprep.monitoring._remedies import remedies
from fastprep.monitoring._summary import MonitorSummary

__all__ = ["Monitor", "MonitorSummary", "PipelineFacts", "facts_of", "monitor", "remedies"]
