# Minimal variables for `terraform apply` (see docs/deploy.md). Everything else has a
# default in variables.tf.
project_id = "my-gradeq-project"
region     = "europe-west1"
image      = "europe-west1-docker.pkg.dev/my-gradeq-project/gradeq/gradeq:0.1.0"

# Optional: where alerts go.
# notification_channels = ["projects/my-gradeq-project/notificationChannels/1234567890"]
