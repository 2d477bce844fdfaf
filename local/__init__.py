"""The embedded default: the product on one machine with no AWS account.

emulator/ deploys the synthesized templates to moto and runs the workflows (their SageMaker jobs through the
SageMaker training toolkit); servers/ serves models in each endpoint contract; pipeline.py, demo.py and deploy.py
are the `make pipeline`, `make demo` and `make deploy TARGET=local` entry points. Imports stacks/, never tools/.
"""
