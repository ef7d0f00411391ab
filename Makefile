# Two commands on a fresh machine: `make demo` and `make test`. Both run `setup` first.
SHELL := /bin/bash
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip
PYSPARK_PIN := $(shell grep -E '^pyspark==' requirements.txt)
STAMP := $(VENV)/.installed

.PHONY: setup java kafka chromium spark-cds demo airflow test chaos bench lint docs docs-serve dist executor-env clean

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

# Airflow 3 on 127.0.0.1 with mirrorflow's DAGs and status plugin (docs/airflow/index.md): on
# MIRRORFLOW_CONFIG when it is set, else on two local Kafka clusters it starts (--local-clusters).
airflow: setup
	scripts/airflow-local $(if $(MIRRORFLOW_CONFIG),,--local-clusters)

# The suite's Spark drivers map Spark's classes from an archive recorded once (tests/spark_cds.py).
spark-cds: setup
	@PATH="$(CURDIR)/$(VENV)/bin:$$PATH" $(PY) -m tests.spark_cds

test: setup spark-cds
	PATH="$(CURDIR)/$(VENV)/bin:$$PATH" $(PY) -m pytest -n 4 -m "not chaos"

# The long fault schedules and the long variants of each fault family (docs/development/tests.md):
# on demand, beside `make test`, which keeps one test of each family.
chaos: setup spark-cds
	PATH="$(CURDIR)/$(VENV)/bin:$$PATH" $(PY) -m pytest -n 4 -m chaos

bench: setup
	PATH="$(CURDIR)/$(VENV)/bin:$$PATH" $(PY) benchmarks/run_all.py

lint: setup
	$(VENV)/bin/ruff check .

# The documentation site (docs/, mkdocs.yml) into build/site. --strict turns every warning (a
# broken link or anchor, a page missing from the nav, a reference that cannot be generated) into
# an error; the suite builds it the same way (tests/unit/test_docs_site.py).
# NO_MKDOCS_2_WARNING silences Material's end-of-life banner (printed on every build, not a warning).
docs: setup
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict

# Preview with live reload on http://127.0.0.1:8000 (DOCS_PORT=N for another port). --livereload
# is explicit: with click 8.3+ MkDocs 1.6's own default for it comes out off.
DOCS_PORT ?= 8000
docs-serve: setup
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs serve --strict --livereload --dev-addr 127.0.0.1:$(DOCS_PORT)

# The sdist and the wheel (docs/getting-started/install.md) into build/dist: `python -m build`
# against the pinned setuptools of the venv (--no-isolation: nothing is fetched), the wheel made
# from the sdist, as a user's build would. tests/e2e/test_installed_wheel.py installs what this makes.
DIST ?= build/dist
dist: $(STAMP)
	rm -rf $(DIST)
	$(PY) -m build --no-isolation --outdir $(DIST) .
	@ls -l $(DIST)

# The Python environment a Spark cluster's executors run the jobs in, packed for `spark.archives`
# (docs/operations/scaling-out.md): the wheel `dist` makes, with --no-deps, and only what executors
# import, pinned by requirements.txt, in a new virtualenv packed by venv-pack. EXECUTOR_PYTHON is
# the interpreter it is made with, at the path the executors have it (default: the venv's Python).
EXECUTOR_ENV ?= $(DIST)/mirrorflow-executor-env.tar.gz
executor-env: dist
	$(PY) scripts/build_executor_env.py $(DIST)/mirrorflow-*.whl --output $(EXECUTOR_ENV)$(if \
		$(EXECUTOR_PYTHON), --python $(EXECUTOR_PYTHON))

clean:
	rm -rf $(VENV) build *.egg-info include/*.egg-info .pytest_cache kafka/libs kafka/lines kafka/tools kafka/cds
