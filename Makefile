# The two commands of the README. Both prepare the machine first (scripts/bootstrap.sh), then reuse it.
export JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION := 20
.PHONY: demo test bootstrap synth bench

bootstrap:
	@scripts/bootstrap.sh

demo: bootstrap
	.venv/bin/python -m scenarios spot-interruption

test: bootstrap
	.venv/bin/python -m pytest

synth: bootstrap
	.venv/bin/python app.py

bench: bootstrap
	.venv/bin/python -m bench.interruption --runs 20
