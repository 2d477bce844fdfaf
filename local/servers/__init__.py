"""Local model servers: each endpoint contract served on 127.0.0.1 (LMI NeuronX emulation, real vLLM, the encoder)."""
