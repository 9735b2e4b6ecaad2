# With terraform/examples/minimal.tfvars: a grader that reads its API key from Secret
# Manager and LTI on, so every service reads a secret (tests/infra/test_terraform_plan.py).
grader = {
  kind     = "openai"
  base_url = "https://api.openai.com/v1"
  model    = "gpt-5-mini"
}

# LTI 1.3 on: the intake and the gradebook read the LTI sealing key.
lti_tool_url = "https://grading.school.example"
