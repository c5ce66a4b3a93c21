"""One job's Colab session, seen from the worker host: the runner, the checks before allocation,
what is sent to the VM, the job's files on the host, the attach client, the watchdog and its
rules, adoption, and recovering results from a VM."""
