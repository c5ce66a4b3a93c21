"""Experiment-tracker runs colabq opens for its jobs, and finishes when a job dies with its run.

`runs` is the common part (the run reference recorded on a job, the environment the job gets);
`mlflow_runs` and `wandb_runs` are the two trackers' clients, built on it; `clients` picks
them (a job's run opened, a host's clients). Nothing here is
imported on the worker's hot paths unless a job names a tracker, and the trackers' libraries are
imported only inside the calls that need them.
"""
