# Sourced by scripts/setup.sh, scripts/setup-probe.sh and scripts/bench/run.sh: a virtual environment
# made from a requirements file whose every line is pinned with --hash (pip install --require-hashes
# --no-deps, then pip check), with a stamp of that file's sha256 so it is made again only when the file
# changes.

# pinned_venv_current VENV REQS: true when VENV was made from REQS as it is now.
pinned_venv_current() {
  local venv="$1" reqs="$2"
  [ -x "$venv/bin/python" ] && [ -f "$venv/.shardlint-requirements.sha256" ] &&
    [ "$(cat "$venv/.shardlint-requirements.sha256")" = "$(sha256sum "$reqs" | cut -d' ' -f1)" ]
}

# pinned_venv_make PYTHON VENV REQS [PIP INSTALL ARGS...]: makes VENV afresh with PYTHON and installs REQS.
pinned_venv_make() {
  local python="$1" venv="$2" reqs="$3"
  shift 3
  rm -rf "$venv"
  "$python" -m venv "$venv" || return 1
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check --no-deps --require-hashes "$@" -r "$reqs" ||
    return 1
  "$venv/bin/python" -m pip check --disable-pip-version-check >/dev/null || { "$venv/bin/python" -m pip check >&2; return 1; }
  sha256sum "$reqs" | cut -d' ' -f1 > "$venv/.shardlint-requirements.sha256"
}
