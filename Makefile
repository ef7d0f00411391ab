# Two commands on a fresh machine: `make demo` and `make test`. Both run `setup` first.
SHELL := /bin/bash
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip
PYSPARK_PIN := $(shell grep -E '^pyspark==' requirements.txt)
STAMP := $(VENV)/.installed

.PHONY: setup java kafka chromium demo airflow test bench lint clean

setup: $(STAMP) java kafka chromium

java:
	@scripts/ensure-java.sh

# The pinned Apache Kafka broker and MirrorMaker 2 jars (kafka/pom.xml) into kafka/libs, then the
# class-data-sharing archive that makes each local broker start in ~1.5 s. Both are skipped
# when already done, so setup is offline after the first run.
kafka: java $(STAMP)
	@scripts/ensure-kafka.sh
	@$(PY) -m localkafka.cds

# Debian's chromium for the browser test (Playwright, from requirements.txt, drives it; no browser
# download). Installed with apt where we may; elsewhere skipped with a note, and the test skips.
chromium:
	@scripts/ensure-chromium.sh

$(STAMP): requirements.txt pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "mirrorflow needs Python 3.11+ (set PYTHON=/path/to/python3.11)")'
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PIP) install -q --upgrade pip
	$(PIP) install -q -r requirements.txt
	# pyspark-client (pulled by the Spark provider) overwrites pyspark's Python files: restore them.
	$(PIP) install -q --no-deps --force-reinstall $(PYSPARK_PIN)
	$(PIP) install -q --no-deps --no-build-isolation -e .
	touch $@

demo: setup
	PATH="$(CURDIR)/$(VENV)/bin:$$PATH" $(PY) -m mirrorflow.demo

# Airflow 3 on 127.0.0.1 with mirrorflow's DAGs and status plugin (README: Locally with Airflow):
# on MIRRORFLOW_CONFIG when it is set, else on two local Kafka clusters it starts (--local-clusters).
airflow: setup
	scripts/airflow-local $(if $(MIRRORFLOW_CONFIG),,--local-clusters)

test: setup
	PATH="$(CURDIR)/$(VENV)/bin:$$PATH" $(PY) -m pytest -n 2

bench: setup
	PATH="$(CURDIR)/$(VENV)/bin:$$PATH" $(PY) benchmarks/run_all.py

lint: setup
	$(VENV)/bin/ruff check .

clean:
	rm -rf $(VENV) build *.egg-info include/*.egg-info .pytest_cache kafka/libs kafka/tools kafka/cds
