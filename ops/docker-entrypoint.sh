#!/bin/sh
# The container's entrypoint: each container works on its own copy of the account's Colab CLI
# folder (mounted read-only at /run/colab-cli), so scaled worker replicas never write to one
# folder (the CLI rewrites its settings and refreshes its token there).
set -eu
if [ -d /run/colab-cli ]; then
  mkdir -p "$HOME/.config/colab-cli"
  cp -a /run/colab-cli/. "$HOME/.config/colab-cli/"
  chmod -R go-rwx "$HOME/.config/colab-cli"
fi
exec "$@"
