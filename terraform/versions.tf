terraform {
  # 1.9+ for input validations that refer to other variables (and import blocks whose id
  # is an expression).
  required_version = ">= 1.9, < 2.0"

  required_providers {
    google = {
      source  = "hashicorp/google"
      version = ">= 6.14, < 7.0"
    }
    # google_project_service_identity (the Pub/Sub service agent) exists only in beta.
    google-beta = {
      source  = "hashicorp/google-beta"
      version = ">= 6.14, < 7.0"
    }
    # time_sleep: waits where Google's eventual consistency is the only cure.
    time = {
      source  = "hashicorp/time"
      version = ">= 0.12, < 1.0"
    }
  }
}
