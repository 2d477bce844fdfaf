"""CDK stacks and constructs of the Inferentia2 LLM platform: one folder per deployment unit.

File map (the file for a concern in one guess):

    application.py        compose one environment's stacks into the App; cdk-nag rule packs on
    nag.py                cdk-nag and Control Tower (cfn-guard) rule packs
    paths.py              where things live in the repository (the only Path(__file__) in stacks/)
    image_table.py        reader of images.json, the container-image URIs per region
    jsii_kernel.py        node options for the jsii kernel (app.py adds them before importing aws_cdk)
    code_contract/        what the stacks know about training_code/ (stdlib only, loaded from the files)
        loader.py           the one way to load a training_code module
        qlora.py            train.py's hyperparameter contract, metric definitions, entry point
        nas.py              NAS entry points, tuning-job parameter ranges, metric definitions
    config/               the typed, validated per-environment config (config/<env>.yaml); serving.py builds
                          the serving section from the backends' own sections (serving/backends/)
        aws_limits.py       the AWS request field each setting is sent as; its limits from botocore's model
        aws_models.py       the one reader of botocore's service models (each parsed once, when first needed)
    shared/               CDK pieces two or more units use
        acknowledgments.py  accepted scanner findings, made beside their resources (wildcards rendered at synth)
        assets.py           deterministic, content-addressed tarball assets
        bucket_layout.py    the artifact bucket's prefixes (datasets/, pruning-datasets/, models/, ...), _READY
        container_images.py ContainerImages: the image table as a region mapping, ECR ARNs for grants
        job_access.py       S3Scope, JobImage, JobSecret, JobAccess: what a job reads, writes, runs, opens
        job_request.py      TrainingJobRequest: typed CreateTrainingJob parameters for Step Functions
        job_role.py         SageMakerJobRole: execution role of SageMaker training-type jobs, derived from them
        sagemaker_job_step.py SageMakerJobStep: one .sync job state: request, result, retries, completed check,
                            its role extended (or refused) and the state machine's grants for it
        state_grants.py     a state machine's statements, collected from the states its definition reaches
        placement.py        Placement: isolated mode's subnets and security groups
        sagemaker_endpoint.py SageMakerEndpoint: Model + EndpointConfig + Endpoint, rollout, scaling, alarms
        endpoint_runtime.py what every endpoint execution role needs (ECR login, logs, metrics) and why
        workflow_shell.py   what every state machine shares: failure path, happy path in order, logs
    data/stack.py         KMS key, artifact and access-log buckets (stateful, retained)
    network/stack.py      isolated mode's VPC, endpoints, flow logs and job security group
    training/             QLoRA training
        stack.py            the stack: job role, topic, SSM model pointer, workflow, trigger
        job.py              the training job's CreateTrainingJob request
        compile_job.py      the Neuron compile job around the serving backend's program (its CompileStep)
        workflow.py         the state machine (validate, train, capacity retries, register, record, notify)
        state_paths.py      the execution-state paths two of its parts share ($.training.job_name, $.run, ...)
        registry.py         the quality gate, model facts, lineage and package versions (the gate before RecordModel)
        registry_grants.py  what the registry's states are allowed, and why its wildcards are acceptable
        outcomes.py         how an execution ends and what it records: names local/ and tools/ share (no CDK)
        input_checks.py     its hyperparameter value/name checks and the dataset marker -> folder step
        execution_input.py  the execution input's validation (shared with tools/start_training.py)
        trigger.py          the EventBridge rule on dataset completion markers (datasets/<name>/_READY)
    serving/              the LLM endpoint on ml.inf2
        stack.py            execution role, alarm topic, outputs; builds the backend's endpoint construct
        hosting.py          the SageMakerEndpoint every backend shares
        backends/           one folder per serving backend, found by name (backends/__init__.py: the registry)
            backend.py          the typed interface each folder implements (Backend, CompileStep)
            <name>/__init__.py  its Backend subclass: settings, contract, endpoint, compile step, model types, rules
            <name>/config.py    its serving.<section> settings and cross-field rules (no CDK)
            <name>/contract.py  its container's request and answer (tools/invoke.py)
            <name>/endpoint.py  its CDK construct
            <name>/compile_step.py  its compile program: entrypoint, arguments, environment (no CDK)
            lmi_neuronx/        LMI NeuronX (serving.properties tarball from its one template), discontinued
            vllm_neuronx/       vLLM Neuron (compiled model mounted, SM_ON_* flags)
    pruning/              NAS structural pruning of an encoder
        stack.py            job roles, topic, SSM model pointer, workflow
        jobs.py             the super-network, trial, selection and export job requests
        workflow.py         the state machine (super-network, tuning job, selection, export)
        endpoints.py        the base and pruned encoder endpoints

Layering (tests/stacks/test_layering.py enforces it): paths, image_table, jsii_kernel and code_contract use the standard
library only; config may use them (and PyYAML) and serving/backends/ (every module there but endpoint.py is
CDK-free at run time) but nothing that imports aws_cdk; shared/ may use config;
a unit folder may use shared/ and config but never another unit's folder; application.py composes units.
"""
