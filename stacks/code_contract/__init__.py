"""What the stacks know about training_code/: argument contracts, metric definitions, search-space ranges,
entry-point names. Standard library only; the training code's own modules are loaded from their files by
`load_code_module`, never through sys.path, so config validation can use them before aws_cdk is imported."""
