"""Watching a real training loop for input starvation: ``fastprep.monitor(loader)``.

- loop.py: the Monitor (the wrapper around the loop, its passes and its summary);
- stats.py: per-step waits and step times in constant memory (sums, log histograms);
- events.py: step times on a CUDA device from events on the loop's stream, read steps late;
- samplers.py: GPU (NVML) and CPU utilisation on a daemon thread;
- live.py: the live line (tqdm postfix or log lines) and TensorBoard scalars;
- summary.py: the summary: its numbers, and which advice applies;
- pipeline.py: what the pipeline is (steps, source, loader), read from the objects in front of it;
  steps.py: its transform's steps;
- remedies.py: the remedy table keyed by it (python -m fastprep diagnose advises from it too);
- advice.py: the words of every piece of advice, once (diagnose's verdict, its remedies and the
  summary all read them).
"""

from fastprep.monitoring.loop import Monitor, monitor
from fastprep.monitoring.summary import MonitorSummary

__all__ = ["Monitor", "MonitorSummary", "monitor"]
