variable "project_id" {
  description = "Google Cloud project id that hosts Gradeq (the same project_id as the main configuration)."
  type        = string

  validation {
    condition     = can(regex("^[a-z][a-z0-9-]{4,28}[a-z0-9]$", var.project_id))
    error_message = "project_id must be a Google Cloud project id (6-30 lowercase letters, digits or hyphens)."
  }
}

variable "region" {
  description = "Region of the state bucket and the image repository: the deployment's region."
  type        = string
  default     = "europe-west1"

  validation {
    condition     = can(regex("^[a-z]+-[a-z]+[1-9][0-9]?$", var.region))
    error_message = "region must be a Google Cloud region such as europe-west1."
  }
}

variable "state_prefix" {
  description = "Folder of the main configuration's state in the bucket (the gcs backend's prefix)."
  type        = string
  default     = "gradeq"
}

variable "state_versions_kept" {
  description = "Earlier versions of each state file the bucket keeps, to roll back a broken apply."
  type        = number
  default     = 30

  validation {
    condition     = var.state_versions_kept >= 1
    error_message = "state_versions_kept must be at least 1."
  }
}

variable "repository_id" {
  description = "Artifact Registry repository of the Gradeq image."
  type        = string
  default     = "gradeq"
}

variable "images_kept" {
  description = "Most recent image versions the cleanup policy never deletes, whatever their age: the deployed one and those to roll back to."
  type        = number
  default     = 10

  validation {
    condition     = var.images_kept >= 2
    error_message = "images_kept must be at least 2 (the deployed image and one to roll back to)."
  }
}

variable "image_retention_days" {
  description = "Image versions older than this are deleted, unless among the images_kept most recent."
  type        = number
  default     = 90

  validation {
    condition     = var.image_retention_days >= 1
    error_message = "image_retention_days must be at least 1."
  }
}
