# The bootstrap's variables (docs/deploy.md, "Bootstrap"): the same project and region
# as the main configuration's.
project_id = "my-gradeq-project"
region     = "europe-west1"
