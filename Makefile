# The two commands of the README:
#   make run    set everything up and run the service (embedded SQLite + Redis by default)
#   make test   set everything up and run the whole test suite
PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin

.PHONY: run test setup bench conformance clean

$(BIN)/.installed: requirements.txt requirements-dev.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -r requirements-dev.txt
	touch $@

setup: $(BIN)/.installed

run: setup
	$(BIN)/python manage.py runall

test: setup
	$(BIN)/python -m pytest $(PYTEST_ARGS)

bench: setup
	$(BIN)/python bench/run.py $(BENCH_ARGS)

conformance: setup
	$(BIN)/python -m pytest -p no:cacheprovider -c ../shared/conformance/pytest.ini ../shared/conformance

clean:
	@# the test run's embedded Redis (the server closes the connection as it exits)
	-@[ -S var/test/redis/redis.sock ] && $(BIN)/python -c "import redis; redis.Redis(unix_socket_path='var/test/redis/redis.sock').shutdown(nosave=True)" 2>/dev/null || true
	rm -rf $(VENV) var/test
