# With terraform/examples/minimal.tfvars: a grader that reads its API key from Secret
# Manager, so every service reads a secret (tests/infra/test_terraform_plan.py).
grader = {
  kind     = "openai"
  base_url = "https://api.openai.com/v1"
  model    = "gpt-5-mini"
}
