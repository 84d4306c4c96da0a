# shellcheck shell=bash
# What the scripts in scripts/ share. Each sources it relative to its own file, symlinks resolved:
#
#   source "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/lib/common.sh"
#
#   step TEXT...                  a section heading, on stderr (stdout is left to what callers
#                                 read: results, summary lines, paths), with the time since the
#                                 run began and the duration of this script's step before it:
#                                 "=== TEXT  [at 4m12s; previous step 1m05s]". The run began
#                                 when the outermost script sourced this (ZKL_RUN_STARTED, epoch
#                                 seconds, exported to the scripts it runs).
#   as_root COMMAND...            COMMAND as root: directly when root, else through sudo
#   need_debs [OPTION...] PKG...  Debian's packages PKG installed, those not installed yet only;
#                                 OPTIONs (leading, e.g. --no-install-recommends) go to apt-get
#                                 install. apt-get update runs once per boot (the stamp
#                                 /tmp/.zklock-apt-updated), and again if the install then fails.
#                                 apt-get's output goes to stderr. Non-zero if it could not.
#   installed_wheel_tag PYTHON... the wheel tags (space-separated) of the zklock that PYTHON, a
#                                 command with any prefix that runs it, has installed
#
# Functions only, and ZKL_RUN_STARTED: it sets no shell option and changes no directory.

export ZKL_RUN_STARTED=${ZKL_RUN_STARTED:-$EPOCHSECONDS}
_step_started=
_step_duration() { printf '%dm%02ds' $(($1 / 60)) $(($1 % 60)); }
step() {
  local now=$EPOCHSECONDS
  printf '\n=== %s  [at %s%s]\n' "$*" "$(_step_duration $((now - ZKL_RUN_STARTED)))" \
    "${_step_started:+; previous step $(_step_duration $((now - _step_started)))}" >&2
  _step_started=$now
}

installed_wheel_tag() {
  "$@" -c 'import importlib.metadata as m; print(*[l.split(": ")[1] for l in m.distribution("zookeeper-lock").read_text("WHEEL").splitlines() if l.startswith("Tag: ")])'
}

as_root() {
  if [[ $(id -u) -eq 0 ]]; then
    "$@"
  elif command -v sudo >/dev/null 2>&1; then
    sudo "$@"
  else
    echo "$0: need root (or sudo) to run: $*" >&2
    return 1
  fi
}

need_debs() {
  local options=() missing=() pkg status
  while [[ ${1:-} == -* ]]; do options+=("$1"); shift; done
  for pkg in "$@"; do
    status="$(dpkg-query -W -f='${db:Status-Status}\n' "$pkg" 2>/dev/null)" || true
    [[ $'\n'$status$'\n' == *$'\n'installed$'\n'* ]] || missing+=("$pkg")
  done
  ((${#missing[@]})) || return 0
  if ! command -v apt-get >/dev/null 2>&1; then
    echo "$0: missing ${missing[*]} and no apt-get to install it" >&2
    return 1
  fi
  echo "$0: installing ${missing[*]} with apt-get" >&2
  # DPkg::Lock::Timeout: the suites of scripts/test run side by side, and apt-get takes one lock.
  local apt=(env DEBIAN_FRONTEND=noninteractive apt-get -q -o DPkg::Lock::Timeout=300)
  local stamp=/tmp/.zklock-apt-updated
  if [[ ! -e $stamp ]]; then
    as_root "${apt[@]}" update >&2 && touch "$stamp" 2>/dev/null || true
  fi
  as_root "${apt[@]}" install -y "${options[@]}" "${missing[@]}" >&2 && return 0
  as_root "${apt[@]}" update >&2 || return
  as_root "${apt[@]}" install -y "${options[@]}" "${missing[@]}" >&2
}
