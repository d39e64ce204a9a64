#!/usr/bin/env bash
# ember's bytecode tests (and its capture tests, where the interpreter supports the version) on
# another CPython, e.g. 3.12 or 3.13 (issue 13; the decision is in docs/python_versions.md).
#
#   .ci/other_python.sh 3.12            # tests/bytecode, then tests/capture if supported
#   .ci/other_python.sh 3.13 bytecode   # tests/bytecode only
#
# The venv lives in a cache kept between runs ($EMBER_CI_CACHE, default ~/.cache/ember-ci/venvNNN):
# a small one (pytest, hypothesis: enough for tests/bytecode, which needs no torch) and the torch
# wheel from the package registry plus ember's dependencies (several GB; ~6.5 minutes to download
# and install on this network). A build that fails or runs out of time prints why and the run
# goes on with what it has. EMBER_CI_DEADLINE (epoch seconds) caps every step, so a slow download
# cannot push CI past its limit. Exit status: 0 passed or skipped (printed), 1 a test failed.
set -uo pipefail
cd "$(dirname "$0")/.."

VER=${1:?usage: $0 3.12 [bytecode|all]}
WHAT=${2:-all}
TAG=${VER/./}
CACHE=${EMBER_CI_CACHE:-$HOME/.cache/ember-ci}
VENV=$CACHE/venv$TAG
DEADLINE=${EMBER_CI_DEADLINE:-$(( $(date +%s) + 3600 ))}
say() { echo "[python $VER] $*"; }
left() { echo $(( DEADLINE - $(date +%s) )); }
limit() {  # seconds for a step: its own cap, or what is left before the deadline
    local cap=$1 rest; rest=$(left)
    (( rest < 1 )) && rest=1
    (( rest < cap )) && echo "$rest" || echo "$cap"
}

PY=$(command -v "python$VER" 2>/dev/null || true)
if [ -z "$PY" ] || ! "$PY" -c pass 2>/dev/null; then
    PY=$(ls -d "${PYENV_ROOT:-$HOME/.pyenv}"/versions/"$VER".*/bin/python"$VER" 2>/dev/null | tail -1)
fi
if [ -z "$PY" ] || ! "$PY" -c pass 2>/dev/null; then
    say "SKIPPED: no python$VER on this machine"
    exit 0
fi

# What to install, from pyproject.toml (dependencies + the test extra), so it cannot drift.
REQS=$("$PY" - 2>/dev/null <<'EOF'
import tomllib
p = tomllib.load(open("pyproject.toml", "rb"))["project"]
print(" ".join(p["dependencies"] + p["optional-dependencies"]["test"] + ["numpy"]))
EOF
)
# The pip constraints of this machine (if any) name the wheels on its disk; the registry's wheels
# for other Pythons are what is wanted here.
export PIP_CONSTRAINT= PIP_DISABLE_PIP_VERSION_CHECK=1

pip_install() {  # quiet, without this machine's notes about its local package index
    timeout "$1" "$VENV/bin/python" -m pip install -q "${@:2}" 2>&1 | grep -v "is ignored: it is neither a file nor"
    return "${PIPESTATUS[0]}"
}

build_base() {
    if [ -f "$VENV/.ember-base" ] && [ "$(cat "$VENV/.ember-base")" = "$PY" ]; then return 0; fi
    rm -rf "$VENV"
    mkdir -p "$CACHE"
    "$PY" -m venv "$VENV" && pip_install "$(limit 600)" pytest hypothesis && echo "$PY" > "$VENV/.ember-base"
}

build_torch() {
    if [ -f "$VENV/.ember-torch" ] && [ "$(cat "$VENV/.ember-torch")" = "$REQS" ]; then
        say "torch venv: cached ($VENV)"
        return 0
    fi
    if [ -z "$REQS" ]; then
        say "torch venv: NOT built (could not read the requirements from pyproject.toml)"
        return 1
    fi
    local t0=$SECONDS
    say "torch venv: installing $REQS (budget $(limit 2400) s)"
    # shellcheck disable=SC2086
    if pip_install "$(limit 2400)" $REQS; then
        echo "$REQS" > "$VENV/.ember-torch"
        say "torch venv: built in $((SECONDS - t0)) s ($(du -sh "$VENV" 2>/dev/null | cut -f1))"
        return 0
    fi
    say "torch venv: NOT built after $((SECONDS - t0)) s (download failed or out of time)"
    return 1
}

run_tests() {  # label, paths...
    local label=$1; shift
    local out rc
    out=$(mktemp)
    PYTHONPATH=$PWD timeout "$(limit 2400)" "$VENV/bin/python" -m pytest -q -p no:cacheprovider "$@" >"$out" 2>&1
    rc=$?
    grep -E "^(FAILED|ERROR) " "$out" | head -40
    say "$label: $(tail -1 "$out")"
    (( rc == 124 )) && say "$label: stopped at the time limit"
    rm -f "$out"
    return $rc
}

if (( $(left) < 120 )); then
    say "SKIPPED: less than 2 minutes left before the CI deadline"
    exit 0
fi
if ! build_base; then
    say "SKIPPED: could not make a venv with pytest for python$VER (no network?)"
    exit 0
fi
status=0
have_torch=0
if [ "$WHAT" = "all" ] && build_torch; then have_torch=1; fi
run_tests "tests/bytecode" tests/bytecode || status=1

if [ "$WHAT" != "all" ]; then exit $status; fi
supported=$("$VENV/bin/python" - <<'EOF'
import importlib.util, sys
spec = importlib.util.spec_from_file_location("support", "ember/support.py")
mod = importlib.util.module_from_spec(spec); spec.loader.exec_module(mod)
print(int(sys.version_info[:2] in mod.SUPPORTED_PYTHON))
EOF
)
if [ "$supported" != "1" ]; then
    say "tests/capture: SKIPPED (ember's interpreter does not support Python $VER yet: ember/support.py)"
elif (( ! have_torch )); then
    say "tests/capture: SKIPPED (no torch venv)"
elif (( $(left) < 300 )); then
    say "tests/capture: SKIPPED (less than 5 minutes left before the CI deadline)"
else
    run_tests "tests/capture" tests/capture || status=1
fi
exit $status
