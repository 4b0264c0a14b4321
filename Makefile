# hoprag: two commands do all set-up on a fresh machine.
#   make demo   venv + install + models + sample index, then answers a sample question
#   make test   the same set-up, then the test suite (both tiers)
#   make test-fast  the same set-up, then the fast tier alone (no chat model)
#   make serve  the same set-up, then every graph behind `langgraph dev` on
#               127.0.0.1:$HOPRAG_PORT (default 8123) for chat clients and Studio
# Every step is idempotent: a second run skips finished work.

PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
HOPRAG := $(VENV)/bin/hoprag
STAMP  := $(VENV)/.hoprag-installed
SAMPLE := app/data/sample/corpus.json
export CMAKE_BUILD_PARALLEL_LEVEL ?= 2

.PHONY: setup demo serve test test-fast lint browser postgres clean

$(PY):
	$(PYTHON) -c 'import sys; assert sys.version_info[:2] == (3, 11), "hoprag needs Python 3.11"'
	$(PYTHON) -m venv $(VENV)

# torch first and pinned, so that nothing pulls a multi-GB CUDA build.
$(STAMP): pyproject.toml | $(PY)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q torch==2.13.0
	$(PY) -m pip install -q -e ".[dev]"
	touch $(STAMP)

# `llm build` compiles llama.cpp's llama-server from the pinned llama-cpp-python sdist
# with instruction sets chosen for this CPU (never AMX), and installs it only once it has
# answered with the chat model (about 10 minutes on 2 cores, once; later runs find it).
setup: $(STAMP)
	$(HOPRAG) models fetch
	$(HOPRAG) llm build
	$(HOPRAG) index $(SAMPLE) --name sample --quiet

demo: setup
	$(HOPRAG) ask "Which river flows through the town where Tavistrom College is located?" --index sample

# Offline unless LANGSMITH_TRACING is turned on; binds to loopback unless HOPRAG_HOST says
# otherwise (see README, "Exposing the server").
serve: setup
	$(HOPRAG) serve

# The report test opens the HTML report in a real headless browser (Debian's chromium).
browser:
	@command -v chromium >/dev/null || { apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium; }

# The scale-out tests start throwaway PostgreSQL clusters with initdb and pg_ctl (Debian
# puts them in /usr/lib/postgresql/*/bin, off PATH); the package's own cluster is not used.
postgres:
	@command -v initdb >/dev/null || ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || \
	  { apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends postgresql; }

# Both tiers: the fast one, then the end-to-end one (real chat model, servers, the CLI).
test: setup browser postgres
	$(PY) -m pytest

# The fast tier alone: stub chat model, small embedder and NER, the sample's stores.
test-fast: setup
	$(PY) -m pytest -m "not e2e"

lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache
