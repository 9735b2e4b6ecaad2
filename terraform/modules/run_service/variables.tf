variable "name" {
  description = "Cloud Run service name (the root's local.service_names, which also make its URL)."
  type        = string
}

variable "location" {
  description = "Cloud Run region."
  type        = string
}

variable "image" {
  description = "Container image; every Gradeq service runs the same one."
  type        = string
}

variable "service_account" {
  description = "Email of the service account the revisions run as (one per service)."
  type        = string
}

variable "ingress" {
  description = "Cloud Run ingress: INGRESS_TRAFFIC_INTERNAL_ONLY for everything but the public intake."
  type        = string
}

variable "invoker_iam_disabled" {
  description = "true only for a public intake: Cloud Run then skips its run.invoker check."
  type        = bool
}

variable "deletion_protection" {
  description = "Whether terraform may delete the service."
  type        = bool
}

variable "labels" {
  description = "Labels on the service."
  type        = map(string)
}

variable "request_timeout" {
  description = "Cloud Run request timeout (\"60s\"): as long as the longest request the service must finish."
  type        = string
}

variable "sizing" {
  description = "CPU, memory, request concurrency and instance bounds (the root's var.intake, var.worker, var.notification)."
  type = object({
    cpu           = string
    memory        = string
    concurrency   = number
    min_instances = number
    max_instances = number
  })
}

variable "env" {
  description = "Plain environment values by name; CONCURRENCY is added from sizing.concurrency."
  type        = map(string)
}

variable "secret_env" {
  description = "Environment values read from Secret Manager: env name => secret id (latest version)."
  type        = map(string)
  default     = {}
}
