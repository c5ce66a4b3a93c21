# colabq's job user on the VM: sourced by colab-job.sh (bash), never run by itself.
#
# The wrapper runs as the kernel's user: root on Colab. The job's own processes run as an
# unprivileged user, so that what holds the Hub token (the wrapper's memory, its uploader's and
# downloader's environments, the root-only secrets folder) is out of their reach: `colabq-job`
# (created with `useradd --system` on the VM if missing), else nobody (65534). The user is created
# only where the wrapper's folder is the system's /content (a real VM): the emulator's VMs and the
# tests' folders share their host's users, which colabq never changes; they use an existing
# `colabq-job`, else nobody. A wrapper that is not root (a rehearsal as another user) cannot
# change users: the job then runs as the wrapper's user, as it always did.
#
# job_user_init ROOT JOB: sets JOB_UID and JOB_GID (empty: no separation), JOB_USER, JOB_HOME (a
# folder of the job's own, 0700, outside the job's folder), and JOB_AS, the argv prefix that runs
# a command as the job user (setpriv, else python3; no supplementary groups, no new privileges).
# job_user_owns PATH...: hands PATH (recursively, links themselves, never what they point to)
# to the job user.

# The drop without setpriv: groups, gid, uid, no_new_privs, then exec the command.
JOB_DROP_PY='import ctypes, os, sys
uid, gid = int(sys.argv[1]), int(sys.argv[2])
os.setgroups([]); os.setresgid(gid, gid, gid); os.setresuid(uid, uid, uid)
ctypes.CDLL(None).prctl(38, 1, 0, 0, 0)
os.execvp(sys.argv[3], sys.argv[3:])'

job_user_init() {
  local root="$1" job="$2" name=colabq-job
  JOB_UID="" JOB_GID="" JOB_USER="" JOB_HOME="" JOB_AS=()
  [ "$(id -u)" = 0 ] || return 0
  if ! id -u "$name" >/dev/null 2>&1 && [ "$root" = /content ]; then
    useradd --system --user-group --no-create-home --home-dir /nonexistent \
      --shell /usr/sbin/nologin "$name" >/dev/null 2>&1 || true
  fi
  if id -u "$name" >/dev/null 2>&1; then
    JOB_UID="$(id -u "$name")" JOB_GID="$(id -g "$name")" JOB_USER="$name"
  else
    JOB_UID=65534 JOB_GID=65534 JOB_USER="$(id -nu 65534 2>/dev/null || echo nobody)"
  fi
  if command -v setpriv >/dev/null 2>&1; then
    JOB_AS=(setpriv "--reuid=$JOB_UID" "--regid=$JOB_GID" --clear-groups --no-new-privs --)
  else
    JOB_AS=(python3 -c "$JOB_DROP_PY" "$JOB_UID" "$JOB_GID")
  fi
  JOB_HOME="$root/.colabq-home/$job"
  mkdir -p "$JOB_HOME" && chmod 711 "$root/.colabq-home"
  chown "$JOB_UID:$JOB_GID" "$JOB_HOME" && chmod 700 "$JOB_HOME"
}

job_user_owns() {
  [ -n "$JOB_UID" ] || return 0
  chown -R -P "$JOB_UID:$JOB_GID" "$@"
}
