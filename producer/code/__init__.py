"""The training repository shipped with a job (`code: git|snapshot`): what `colabq submit`
checks and stages before anything is enqueued.

`gitrepo.py` inspects the repository with git (the commit, a dirty tree, the remote and whether
the commit is on it); `uvcheck.py` the uv project (`uv lock --check`, the Python pin);
`survey.py` puts them together for one request (`CodeState`); `checks.py` turns a survey into
the pre-flight's `code` and `environment` findings; `snapshot.py` builds the archive of a
commit and its declared untracked files; `ship.py` builds the job's `CodeSpec`, stages a
snapshot once per submit and describes what the VM will fetch and run. Nothing here imports
pydantic, Celery or huggingface_hub at module level: `colabq preflight` loads the checks lean.
"""
