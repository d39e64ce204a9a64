# ember: `make demo` and `make test` work on a fresh machine (Python 3.11, gcc for inductor).
PY ?= python3.11
VENV := .venv
VPY := $(VENV)/bin/python
STAMP := $(VENV)/.ember-installed

.PHONY: demo test test-all bench venv clean test-py312 test-py313

$(STAMP): pyproject.toml
	@test -x $(VPY) || $(PY) -m venv $(VENV) || python3 -m venv $(VENV)
	# torch==2.13.0 takes the CPU wheel already on the machine; install it first
	# so that nothing pulls a CUDA build.
	$(VPY) -m pip install -q torch==2.13.0
	$(VPY) -m pip install -q -e '.[test]'
	@touch $(STAMP)

venv: $(STAMP)

demo: $(STAMP)
	$(VPY) -m ember demo

test: $(STAMP)
	$(VPY) -m pytest -q -p no:cacheprovider

test-all: $(STAMP)
	EMBER_SLOW=1 $(VPY) -m pytest -q -p no:cacheprovider

# tests/bytecode and tests/capture on other CPythons (venvs cached in ~/.cache/ember-ci; see
# .ci/other_python.sh and docs/python_versions.md)
test-py312:
	.ci/other_python.sh 3.12

test-py313:
	.ci/other_python.sh 3.13

bench: $(STAMP)
	$(VPY) -m benchmarks.run

clean:
	rm -rf $(VENV) build *.egg-info
