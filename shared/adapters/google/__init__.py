"""Google Cloud adapters: Firestore, Cloud Tasks and Pub/Sub (see `factory`)."""
