#!/usr/bin/env bash
# Plans the teardown of a Gradeq deployment (docs/deploy.md, "Teardown"). Run it in
# terraform/, after an apply with deletion_protection = false, with the options of your
# plans (e.g. -var-file=gradeq.tfvars); it applies nothing.
#
# 1. Terraform forgets what the teardown keeps, which stays in the project as it is: the
#    secrets (adopted with their values), the Firestore database, the uploads bucket and
#    the analytics dataset with its tables (students' work and its history).
# 2. It plans the destruction of the rest, lifting prevent_destroy for this plan only on
#    the queues, topics and subscriptions (an override file, removed on exit).
# Review the plan it prints, then: terraform apply teardown.tfplan
set -euo pipefail

cd "$(dirname "$0")"
TERRAFORM="${TERRAFORM:-terraform}"

# Kept: forgotten by terraform, left in the project.
KEPT='^(google_secret_manager_secret\.[a-z_]+(\[[0-9]+\])?|google_firestore_database\.main|google_storage_bucket\.uploads|google_bigquery_dataset\.analytics|google_bigquery_table\.[a-z_0-9]+)$'

addresses="$("$TERRAFORM" state list)"
kept="$(printf '%s\n' "$addresses" | grep -E "$KEPT" || true)"
if [ -n "$kept" ]; then
  echo "Kept in the project, forgotten by terraform:"
  printf '%s\n' "$kept" | sed 's/^/  /'
  printf '%s\n' "$kept" | while IFS= read -r address; do
    "$TERRAFORM" state rm "$address" >/dev/null
  done
fi

trap 'rm -f teardown_override.tf' EXIT
cat >teardown_override.tf <<'EOF'
# Written by teardown.sh for the teardown plan only: these may be destroyed.
resource "google_cloud_tasks_queue" "main" {
  lifecycle {
    prevent_destroy = false
  }
}

resource "google_pubsub_topic" "events" {
  lifecycle {
    prevent_destroy = false
  }
}

resource "google_pubsub_topic" "dead_letter" {
  lifecycle {
    prevent_destroy = false
  }
}

resource "google_pubsub_subscription" "notification" {
  lifecycle {
    prevent_destroy = false
  }
}

resource "google_pubsub_subscription" "gradebook" {
  lifecycle {
    prevent_destroy = false
  }
}

resource "google_pubsub_subscription" "analytics" {
  lifecycle {
    prevent_destroy = false
  }
}

resource "google_pubsub_subscription" "dead_letter" {
  lifecycle {
    prevent_destroy = false
  }
}
EOF

"$TERRAFORM" plan -destroy -input=false -out=teardown.tfplan "$@"
echo
echo "Review the plan above, then run: terraform apply teardown.tfplan"
