"""A terraform provider stand-in for hashicorp/google, google-beta and time (no network).

It serves the providers' published schemas over terraform's plugin protocol, with
hashicorp/google's own validators and replacements (facts.py), so terraform itself
validates and plans terraform/ offline (`make terraform-check`,
docs/terraform-check.md). `check` prepares the CLI configuration and runs terraform.
"""
