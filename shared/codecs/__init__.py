"""GradingCompleted on the wire: CloudEvents codec, JSON Schema and Pub/Sub push envelopes."""
