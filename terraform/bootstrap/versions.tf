terraform {
  required_version = ">= 1.9, < 2.0"

  # Local state on purpose: this configuration creates the bucket that holds the main
  # configuration's state. Its own state is small and rarely changes; keep
  # terraform.tfstate of this folder safe (docs/deploy.md, "Bootstrap").
  required_providers {
    google = {
      source  = "hashicorp/google"
      version = ">= 6.14, < 7.0"
    }
  }
}
