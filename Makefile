# runonce: every target installs what it needs first (a fresh clone needs only python3, node,
# gcloud with the Firestore emulator, and Java).
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed-$(shell cksum < requirements.txt | cut -d' ' -f1)
export PYTHONPATH := $(CURDIR):$(CURDIR)/functions
export CHECKPOINT_DISABLE := 1

.PHONY: install test bench

install: $(STAMP)

$(STAMP): requirements.txt
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install --quiet --disable-pip-version-check -r requirements.txt
	rm -f $(VENV)/.installed-* && touch $@

## make test: the whole suite against a real Firestore emulator the tests start themselves.
test: $(STAMP)
	$(PY) -m pytest

## make bench: runonce against the seed's two-transaction pattern, side by side, one emulator.
bench: $(STAMP)
	$(PY) -m benchmarks.ledger
