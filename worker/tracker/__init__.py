"""Experiment-tracker runs colabq opens for its jobs, and finishes when a job dies with its run.

`runs` is the common part (the run reference recorded on a job, the environment the job gets,
opening a run); `mlflow_runs` and `wandb_runs` are the two trackers' clients. Nothing here is
imported on the worker's hot paths unless a job names a tracker, and the trackers' libraries are
imported only inside the calls that need them.
"""
