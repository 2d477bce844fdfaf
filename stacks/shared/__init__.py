"""CDK pieces two or more deployment units use: job requests and roles, the workflow shell, the endpoint."""
