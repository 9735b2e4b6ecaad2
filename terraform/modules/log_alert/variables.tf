variable "name" {
  description = "Log-based metric name, unique in the project (the root passes name_prefix/event)."
  type        = string
}

variable "display_name" {
  description = "Alert policy display name."
  type        = string
}

variable "description" {
  description = "What the metric counts."
  type        = string
}

variable "log_filter" {
  description = "Cloud Logging filter selecting the log lines to count."
  type        = string
}

variable "documentation" {
  description = "Markdown shown to whoever receives the alert: what happened and where to look."
  type        = string
}

variable "notification_channels" {
  description = "Monitoring notification channel ids."
  type        = list(string)
  default     = []
}

variable "labels" {
  description = "User labels on the alert policy."
  type        = map(string)
  default     = {}
}
