# `make demo` and `make test` bootstrap .venv from nothing and are idempotent.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
# The CPU wheel of torch lies on this machine's disk; asking for exactly this version never pulls CUDA.
TORCH  ?= torch==2.13.0

.PHONY: install demo test lint docs bench bench-all clean ship-zoo

install: $(STAMP)

$(STAMP): pyproject.toml Makefile
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check "$(TORCH)"
	$(PY) -m pip install --quiet --disable-pip-version-check -e ".[dev,ray,sb3,trl,lora,serve]"
	touch $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/cgym demo --overwrite
	$(VENV)/bin/cgym eval --out runs/eval --overwrite

test: $(STAMP)
	$(PY) -m pytest -q

lint: $(STAMP)
	$(VENV)/bin/ruff check coalition_gym
	$(VENV)/bin/mypy

# The documentation site (mkdocs.yml, docs/) into site/, strict: a broken link or cross-reference fails it.
docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict --site-dir site

# What each script runs and how long it took (the total_seconds in its benchmarks/results/ JSON): docs/benchmarks.md;
# tests/test_readme.py fails when that table and these lists differ.
bench: $(STAMP)
	$(PY) benchmarks/env_throughput.py
	$(PY) benchmarks/valuation_cost.py
	$(PY) benchmarks/scoring_throughput.py
	$(PY) benchmarks/protocol_comparison.py
	$(PY) benchmarks/backend_throughput.py
	$(PY) benchmarks/sb3_router.py
	$(PY) benchmarks/vector_and_ray.py
	$(PY) benchmarks/estimators.py

bench-all: bench
	$(PY) benchmarks/robustness.py
	$(PY) benchmarks/collab_training.py
	$(PY) benchmarks/crl_demo.py

# Maintainers: rebuild the default and tiny zoos here and ship them in the package (new fingerprints:
# every zoo number in the README and benchmarks/results/ must then be re-measured).
ship-zoo: $(STAMP)
	$(PY) -c "from coalition_gym.agents.zoo import build_zoo, shipped; import tempfile; \
	root = tempfile.mkdtemp(); [print(shipped.ship(build_zoo(r, root, force=True))) for r in ('tiny', 'default')]"

clean:
	rm -rf $(VENV) .pytest_cache
