# The two commands of the README (demo, test), the static checks and the benchmarks. Every target prepares the
# machine first (scripts/bootstrap.sh), then reuses it: synth and lint need only the virtualenv (bootstrap-venv:
# no apt-get, no kube-apiserver build); demo, test and the benchmarks need the local world too (bootstrap).
# With a virtualenv prepared elsewhere:
#   make lint VENV=/path/to/venv NO_BOOTSTRAP=1
export JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION := 20
VENV ?= .venv
PY := $(VENV)/bin/python
# The packages mypy --strict checks (the deployed and in-cluster code, the simulation, the operator CLI, the
# benchmarks and scenarios); those not present yet are skipped.
TYPED := $(wildcard core adapters lambdas agent sim cli charts bench scenarios)
# What pylint holds to 400 lines a module (pyproject.toml): every package of Python sources, and app.py.
SIZED := $(TYPED) $(wildcard infra localworld tests) app.py
.PHONY: demo test bootstrap bootstrap-venv synth bench lint bench-smoke check image

bootstrap:
	@[ -n "$(NO_BOOTSTRAP)" ] || scripts/bootstrap.sh

bootstrap-venv:
	@[ -n "$(NO_BOOTSTRAP)" ] || scripts/bootstrap.sh --venv-only

demo: bootstrap
	$(PY) -m scenarios spot-interruption

test: bootstrap
	$(PY) -m pytest

synth: bootstrap-venv
	$(PY) app.py

bench: bootstrap
	$(PY) -m bench.interruption --runs 20

# Static checks, fast, before the tests: every tool runs even when an earlier one found something, and the target
# fails if any did.
lint: bootstrap-venv
	@rc=0; \
	for step in "ruff check ." "ruff format --check ." "mypy --strict $(TYPED)" "lint-imports" "pylint --score=n $(SIZED)"; do \
	  echo "== $$step" >&2; $(VENV)/bin/$$step || rc=1; \
	done; exit $$rc

# Every benchmark once at its smallest size: proves the documented commands still run (numbers are not judged).
bench-smoke: bootstrap
	$(PY) -m bench.coldstart --smoke
	$(PY) -m bench.replenisher --smoke
	$(PY) -m bench.refresher --smoke
	$(PY) -m bench.interruption --smoke
	$(PY) -m bench.membership --smoke
	$(PY) -m bench.wave --smoke
	$(PY) -m bench.wave_slots --smoke
	$(PY) -m bench.lock_race --smoke
	$(PY) -m bench.sim_dynamo --smoke
	$(PY) -m bench.run_item --smoke
	$(PY) -m bench.run_item --pass --smoke

check: lint bench-smoke

# The agent's image for amd64 and arm64 nodes, pushed to IMAGE (docs/DEPLOY.md): docker buildx with a builder that
# runs both (QEMU binfmt or native nodes). Example: make image IMAGE=<account>.dkr.ecr.<region>.amazonaws.com/node-manager-agent:0.1.0
IMAGE ?= node-manager-agent:0.1.0
PLATFORMS ?= linux/amd64,linux/arm64
image:
	docker buildx build --platform $(PLATFORMS) -t $(IMAGE) --push .

# Mutation testing of the fleet simulation (issue 12): each known bug put back, seeds until an invariant breaks (up to
# 300 a mutant; exit 1 when one is not found). `make test` only replays the seed each was first found by, with and
# without its patch (tests/unit/sim/test_mutations.py, FIRST_SEEDS).
.PHONY: mutants
mutants: bootstrap-venv
	$(PY) -m sim.mutants --seeds 300

# The fleet simulation's long soak (issue 12, docs/SIMULATION.md "Soak"): thousands of seeds of a small cluster for a
# simulated day each, every invariant checked; a failing seed is shrunk and printed with its replay command, and the
# target fails. About 1 CPU second a seed on the 2-core machine (BENCHMARKS.md): 2,000 seeds, half an hour of CPU,
# about a quarter of an hour of wall time at SOAK_JOBS=2. SOAK_PROFILE=storm draws every fault four times as often;
# SOAK_PROFILE=resize adds kOps resizes of worker groups to it.
SOAK_SEEDS ?= 2000
SOAK_FIRST ?= 1000
SOAK_NODES ?= 12
SOAK_DAYS ?= 1
SOAK_JOBS ?= 2
SOAK_PROFILE ?= default
.PHONY: soak
soak: bootstrap-venv
	$(PY) -m sim run --seeds $(SOAK_SEEDS) --first $(SOAK_FIRST) --nodes $(SOAK_NODES) --days $(SOAK_DAYS) \
		--jobs $(SOAK_JOBS) --profile $(SOAK_PROFILE)
