# Made once per project, before the main configuration (docs/deploy.md, "Bootstrap"):
# the bucket that keeps terraform's state of the deployment, and the Artifact Registry
# repository the image is pushed to before the first apply can deploy it.

provider "google" {
  project = var.project_id
  region  = var.region

  # Bill every call to this project, whatever quota project the credentials carry
  # (the provider does not read the one in Application Default Credentials).
  billing_project       = var.project_id
  user_project_override = true
}

resource "google_project_service" "main" {
  for_each = toset(["artifactregistry.googleapis.com", "storage.googleapis.com"])

  project            = var.project_id
  service            = each.value
  disable_on_destroy = false
}

# Terraform's state of the deployment (backend "gcs"). Versioned, so a broken or
# half-written state can be rolled back; the gcs backend locks it with a lock file.
resource "google_storage_bucket" "state" {
  #checkov:skip=CKV_GCP_62:Access to the state is audited by Cloud Audit Logs; usage logs to another bucket add cost without a reader.
  name     = "${var.project_id}-tfstate"
  location = var.region

  uniform_bucket_level_access = true
  public_access_prevention    = "enforced"

  versioning {
    enabled = true
  }

  # Earlier versions of a state file beyond the newest state_versions_kept go.
  lifecycle_rule {
    condition {
      num_newer_versions = var.state_versions_kept
      with_state         = "ARCHIVED"
    }
    action {
      type = "Delete"
    }
  }

  labels = { app = "gradeq" }

  # The state is the only record of what terraform manages: never destroyed from here.
  lifecycle {
    prevent_destroy = true
  }

  depends_on = [google_project_service.main]
}

# The Gradeq image. Tags are immutable: a tag (the commit) names one image for good, and
# the services are deployed by digest anyway (var.image of the main configuration).
resource "google_artifact_registry_repository" "images" {
  #checkov:skip=CKV_GCP_84:The image holds Gradeq's open-source code and no data; Google-managed encryption is enough. Add kms_key_name if your policy demands CMEK.
  location      = var.region
  repository_id = var.repository_id
  description   = "Gradeq container images."
  format        = "DOCKER"

  docker_config {
    immutable_tags = true
  }

  # Keep policies win over delete policies: the images_kept most recent versions stay
  # whatever their age; anything else older than image_retention_days is deleted.
  cleanup_policy_dry_run = false

  cleanup_policies {
    id     = "keep-most-recent"
    action = "KEEP"

    most_recent_versions {
      keep_count = var.images_kept
    }
  }

  cleanup_policies {
    id     = "delete-old"
    action = "DELETE"

    condition {
      tag_state  = "ANY"
      older_than = "${var.image_retention_days * 86400}s"
    }
  }

  labels = { app = "gradeq" }

  lifecycle {
    prevent_destroy = true
  }

  depends_on = [google_project_service.main]
}
