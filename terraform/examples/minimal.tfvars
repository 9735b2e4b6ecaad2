# Minimal variables for `terraform apply` (see docs/deploy.md). Everything else has a
# default in variables.tf.
project_id = "my-gradeq-project"
region     = "europe-west1"
# By digest (docs/deploy.md, step 2).
image = "europe-west1-docker.pkg.dev/my-gradeq-project/gradeq/gradeq@sha256:69ee2d9c6dc292a5c4da9a0edce074dcaf08cea41296940cd03bfb952ff4e4ae"

# No grader is set: the worker grades with the offline keyword grader (no model is
# called). For Gemini on Vertex AI in the region:
# grader = { kind = "gemini" }

# Where alerts go; without a channel the alerts notify nobody (the plan warns).
# notification_channels = ["projects/my-gradeq-project/notificationChannels/1234567890"]
