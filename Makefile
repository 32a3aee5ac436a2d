# dgxspark.ds4 — developer entry points. `make test` is the test command CI runs.
SHELL := /bin/bash
PY ?= $(shell command -v python3.12 || echo /root/.pyenv/versions/3.12.1/bin/python3.12)
VENV ?= .venv
BIN := $(VENV)/bin
COLL_LINK := .collections/ansible_collections/dgxspark/ds4

.PHONY: venv collection-link install

venv: $(BIN)/ansible-playbook
$(BIN)/ansible-playbook: requirements.txt
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q -r requirements.txt
	touch $@

# FQCN names (dgxspark.ds4.*) resolve to this working tree through a symlink.
collection-link:
	mkdir -p $(dir $(COLL_LINK))
	ln -sfn $(CURDIR) $(COLL_LINK)

install: venv collection-link
