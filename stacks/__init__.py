"""CDK stacks and constructs of the Inferentia2 LLM platform."""
