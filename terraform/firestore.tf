# The project's "(default)" database may exist already (created in the console, by App
# Engine, or kept by an earlier teardown). Then import it before applying;
# docs/deploy.md says how. Google's delete protection stays on whatever
# var.deletion_protection says (that one lets the services go before a teardown), and
# terraform never deletes the database: erasing it is a deliberate gcloud command
# (docs/deploy.md, "Teardown").
resource "google_firestore_database" "main" {
  name                              = var.firestore_database
  location_id                       = coalesce(var.firestore_location, var.region)
  type                              = "FIRESTORE_NATIVE"
  concurrency_mode                  = "PESSIMISTIC"
  point_in_time_recovery_enablement = "POINT_IN_TIME_RECOVERY_ENABLED"
  delete_protection_state           = "DELETE_PROTECTION_ENABLED"
  deletion_policy                   = "ABANDON"

  # Never destroyed by accident; the teardown keeps it or lifts this on purpose
  # (docs/deploy.md, "Teardown").
  lifecycle {
    prevent_destroy = true
  }

  depends_on = [time_sleep.apis]
}

# Recovery of stuck jobs: where status == X and updated_at < T order by updated_at.
resource "google_firestore_index" "jobs_status_updated_at" {
  database    = google_firestore_database.main.name
  collection  = var.jobs_collection
  query_scope = "COLLECTION"

  fields {
    field_path = "status"
    order      = "ASCENDING"
  }

  fields {
    field_path = "updated_at"
    order      = "ASCENDING"
  }
}

# Recovery sweep for completion events not yet published:
# where event_published == false and status in [final statuses] and updated_at < T
# order by updated_at. Equality and IN fields come first, the range/order field last.
resource "google_firestore_index" "jobs_unpublished_final" {
  database    = google_firestore_database.main.name
  collection  = var.jobs_collection
  query_scope = "COLLECTION"

  fields {
    field_path = "event_published"
    order      = "ASCENDING"
  }

  fields {
    field_path = "status"
    order      = "ASCENDING"
  }

  fields {
    field_path = "updated_at"
    order      = "ASCENDING"
  }

  # Concurrent index changes on one collection can fail with 409 (contention), which the
  # provider does not retry in every case: build the jobs indexes one after the other.
  depends_on = [google_firestore_index.jobs_status_updated_at]
}

# A client's job listing (GET /v1/grading-jobs, FirestoreJobStore.list_jobs): where
# client_id == C [and status == S] [and request.submission_id == X] order by created_at
# desc, __name__ desc (the cursor's tie-break). One index per combination of the optional
# filters; each is built after the previous one (409 contention, see above).
resource "google_firestore_index" "jobs_client_created" {
  database    = google_firestore_database.main.name
  collection  = var.jobs_collection
  query_scope = "COLLECTION"

  fields {
    field_path = "client_id"
    order      = "ASCENDING"
  }

  fields {
    field_path = "created_at"
    order      = "DESCENDING"
  }

  fields {
    field_path = "__name__"
    order      = "DESCENDING"
  }

  depends_on = [google_firestore_index.jobs_unpublished_final]
}

resource "google_firestore_index" "jobs_client_status_created" {
  database    = google_firestore_database.main.name
  collection  = var.jobs_collection
  query_scope = "COLLECTION"

  fields {
    field_path = "client_id"
    order      = "ASCENDING"
  }

  fields {
    field_path = "status"
    order      = "ASCENDING"
  }

  fields {
    field_path = "created_at"
    order      = "DESCENDING"
  }

  fields {
    field_path = "__name__"
    order      = "DESCENDING"
  }

  depends_on = [google_firestore_index.jobs_client_created]
}

resource "google_firestore_index" "jobs_client_submission_created" {
  database    = google_firestore_database.main.name
  collection  = var.jobs_collection
  query_scope = "COLLECTION"

  fields {
    field_path = "client_id"
    order      = "ASCENDING"
  }

  fields {
    field_path = "request.submission_id"
    order      = "ASCENDING"
  }

  fields {
    field_path = "created_at"
    order      = "DESCENDING"
  }

  fields {
    field_path = "__name__"
    order      = "DESCENDING"
  }

  depends_on = [google_firestore_index.jobs_client_status_created]
}

resource "google_firestore_index" "jobs_client_status_submission_created" {
  database    = google_firestore_database.main.name
  collection  = var.jobs_collection
  query_scope = "COLLECTION"

  fields {
    field_path = "client_id"
    order      = "ASCENDING"
  }

  fields {
    field_path = "status"
    order      = "ASCENDING"
  }

  fields {
    field_path = "request.submission_id"
    order      = "ASCENDING"
  }

  fields {
    field_path = "created_at"
    order      = "DESCENDING"
  }

  fields {
    field_path = "__name__"
    order      = "DESCENDING"
  }

  depends_on = [google_firestore_index.jobs_client_submission_created]
}

# The operators' job listing (admin API and dashboard, FirestoreJobStore.find_jobs):
# [status == S] [and client_id == C] [and request.assignment_id == A]
# [and created_at >= F] [and created_at < T] order by created_at desc, __name__ desc.
# With no equality filter the automatic single-field index on created_at serves it; the
# created range is on the first ordered field, so the index of the equality filters serves
# it too. Each combination of equality filters has its own index: Google documents index
# merging for equality filters with an optional order only, not with the created range
# the listing also sends. jobs_client_created and jobs_client_status_created above already
# serve (client_id) and (status, client_id): equality fields match in any order.
resource "google_firestore_index" "jobs_status_created" {
  database    = google_firestore_database.main.name
  collection  = var.jobs_collection
  query_scope = "COLLECTION"

  fields {
    field_path = "status"
    order      = "ASCENDING"
  }

  fields {
    field_path = "created_at"
    order      = "DESCENDING"
  }

  fields {
    field_path = "__name__"
    order      = "DESCENDING"
  }

  depends_on = [google_firestore_index.jobs_client_status_submission_created]
}

resource "google_firestore_index" "jobs_assignment_created" {
  database    = google_firestore_database.main.name
  collection  = var.jobs_collection
  query_scope = "COLLECTION"

  fields {
    field_path = "request.assignment_id"
    order      = "ASCENDING"
  }

  fields {
    field_path = "created_at"
    order      = "DESCENDING"
  }

  fields {
    field_path = "__name__"
    order      = "DESCENDING"
  }

  depends_on = [google_firestore_index.jobs_status_created]
}

resource "google_firestore_index" "jobs_client_assignment_created" {
  database    = google_firestore_database.main.name
  collection  = var.jobs_collection
  query_scope = "COLLECTION"

  fields {
    field_path = "client_id"
    order      = "ASCENDING"
  }

  fields {
    field_path = "request.assignment_id"
    order      = "ASCENDING"
  }

  fields {
    field_path = "created_at"
    order      = "DESCENDING"
  }

  fields {
    field_path = "__name__"
    order      = "DESCENDING"
  }

  depends_on = [google_firestore_index.jobs_assignment_created]
}

resource "google_firestore_index" "jobs_status_assignment_created" {
  database    = google_firestore_database.main.name
  collection  = var.jobs_collection
  query_scope = "COLLECTION"

  fields {
    field_path = "status"
    order      = "ASCENDING"
  }

  fields {
    field_path = "request.assignment_id"
    order      = "ASCENDING"
  }

  fields {
    field_path = "created_at"
    order      = "DESCENDING"
  }

  fields {
    field_path = "__name__"
    order      = "DESCENDING"
  }

  depends_on = [google_firestore_index.jobs_client_assignment_created]
}

resource "google_firestore_index" "jobs_client_status_assignment_created" {
  database    = google_firestore_database.main.name
  collection  = var.jobs_collection
  query_scope = "COLLECTION"

  fields {
    field_path = "client_id"
    order      = "ASCENDING"
  }

  fields {
    field_path = "status"
    order      = "ASCENDING"
  }

  fields {
    field_path = "request.assignment_id"
    order      = "ASCENDING"
  }

  fields {
    field_path = "created_at"
    order      = "DESCENDING"
  }

  fields {
    field_path = "__name__"
    order      = "DESCENDING"
  }

  depends_on = [google_firestore_index.jobs_status_assignment_created]
}

# TTL: Firestore deletes a document (usually within 24 h) once expire_at has passed.
# Only jobs and processed-event records expire: the counters of jobs not yet final
# (GRADEQ_COUNTERS_COLLECTION) and the API key digests (GRADEQ_API_KEYS_COLLECTION) must
# never be deleted behind the code's back, so they get no TTL policy.
# The TTL field is also exempted from single-field indexing: a timestamp that grows with
# time would otherwise cap write throughput.
resource "google_firestore_field" "jobs_expire_at" {
  database   = google_firestore_database.main.name
  collection = var.jobs_collection
  field      = "expire_at"

  ttl_config {}

  index_config {}
}

resource "google_firestore_field" "processed_events_expire_at" {
  database   = google_firestore_database.main.name
  collection = var.processed_events_collection
  field      = "expire_at"

  ttl_config {}

  index_config {}
}

# A grading's charge document only keeps a redelivered grading from being counted twice
# against its budgets (shared/adapters/google/budget_store.py): deleted by TTL after 62
# days, the field exempt from indexing like the others.
resource "google_firestore_field" "budget_charges_expire_at" {
  database   = google_firestore_database.main.name
  collection = "budget_charges"
  field      = "expire_at"

  ttl_config {}

  index_config {}
}

# The backlog shards' map of each client's jobs not yet final (one entry per client, kept
# at zero when its jobs end): never queried, and Firestore allows 40,000 index entries per
# document, so the map is exempt from single-field indexing. The counters collection keeps
# the code's default name (GRADEQ_COUNTERS_COLLECTION is not set by terraform).
resource "google_firestore_field" "counters_clients" {
  database   = google_firestore_database.main.name
  collection = "grading_job_counters"
  field      = "clients"

  index_config {}
}

# A client's assignments (GET /v1/assignments, FirestoreAssignmentStore.list_of): where
# client_id == C order by created_at desc, __name__ desc (the cursor's tie-break).
resource "google_firestore_index" "assignments_client_created" {
  database    = google_firestore_database.main.name
  collection  = "assignments"
  query_scope = "COLLECTION"

  fields {
    field_path = "client_id"
    order      = "ASCENDING"
  }

  fields {
    field_path = "created_at"
    order      = "DESCENDING"
  }

  fields {
    field_path = "__name__"
    order      = "DESCENDING"
  }

  # One index build at a time in the database (concurrent builds can fail with 409).
  depends_on = [google_firestore_index.jobs_client_status_assignment_created]
}

# AssignmentGraded events recorded but not yet published (the recovery sweep,
# FirestoreAssignmentStore.unpublished_graded): where published == false order by recorded_at.
resource "google_firestore_index" "assignment_graded_unpublished" {
  database    = google_firestore_database.main.name
  collection  = "assignment_graded"
  query_scope = "COLLECTION"

  fields {
    field_path = "published"
    order      = "ASCENDING"
  }

  fields {
    field_path = "recorded_at"
    order      = "ASCENDING"
  }

  depends_on = [google_firestore_index.assignments_client_created]
}

# The review queue (GET /v1/reviews, FirestoreReviewQueue): where client_id == C
# [and request.assignment_id == A] and review.status == S order by review.held_at,
# __name__ (the cursor's tie-break). Built after the listing indexes (409 contention).
resource "google_firestore_index" "jobs_client_review_held" {
  database    = google_firestore_database.main.name
  collection  = var.jobs_collection
  query_scope = "COLLECTION"

  fields {
    field_path = "client_id"
    order      = "ASCENDING"
  }

  fields {
    field_path = "review.status"
    order      = "ASCENDING"
  }

  fields {
    field_path = "review.held_at"
    order      = "ASCENDING"
  }

  fields {
    field_path = "__name__"
    order      = "ASCENDING"
  }

  depends_on = [google_firestore_index.assignment_graded_unpublished]
}

resource "google_firestore_index" "jobs_client_assignment_review_held" {
  database    = google_firestore_database.main.name
  collection  = var.jobs_collection
  query_scope = "COLLECTION"

  fields {
    field_path = "client_id"
    order      = "ASCENDING"
  }

  fields {
    field_path = "request.assignment_id"
    order      = "ASCENDING"
  }

  fields {
    field_path = "review.status"
    order      = "ASCENDING"
  }

  fields {
    field_path = "review.held_at"
    order      = "ASCENDING"
  }

  fields {
    field_path = "__name__"
    order      = "ASCENDING"
  }

  depends_on = [google_firestore_index.jobs_client_review_held]
}

# A student's own jobs (GET /v1/grading-jobs by a signed-in student, FirestoreJobStore.
# list_jobs with an author): author == U beside the client's filters above, OR the
# user's scope in client_id (jobs stored before authors: the jobs_client_* indexes).
# Firestore merges this index with the jobs_client_* ones (equal created_at, __name__
# suffix), so one index serves every combination of the optional filters.
resource "google_firestore_index" "jobs_author_created" {
  database    = google_firestore_database.main.name
  collection  = var.jobs_collection
  query_scope = "COLLECTION"

  fields {
    field_path = "author"
    order      = "ASCENDING"
  }

  fields {
    field_path = "created_at"
    order      = "DESCENDING"
  }

  fields {
    field_path = "__name__"
    order      = "DESCENDING"
  }

  depends_on = [google_firestore_index.jobs_client_assignment_review_held]
}

# A school's whole job listing (FirestoreJobStore.list_jobs without an author) includes its
# users' jobs stored before jobs had an author (client_id `<school>:user:<uid>`): client_id
# == C OR C:user: <= client_id < C:user; [and status == S] [and request.submission_id ==
# X] order by created_at desc, client_id desc, __name__ desc. The equality branch is served
# by the jobs_client_* indexes, the range branch by these, one per combination of filters.

resource "google_firestore_index" "jobs_school_users_created" {
  database    = google_firestore_database.main.name
  collection  = var.jobs_collection
  query_scope = "COLLECTION"

  fields {
    field_path = "created_at"
    order      = "DESCENDING"
  }

  fields {
    field_path = "client_id"
    order      = "DESCENDING"
  }

  fields {
    field_path = "__name__"
    order      = "DESCENDING"
  }

  depends_on = [google_firestore_index.jobs_author_created]
}

resource "google_firestore_index" "jobs_school_users_status_created" {
  database    = google_firestore_database.main.name
  collection  = var.jobs_collection
  query_scope = "COLLECTION"

  fields {
    field_path = "status"
    order      = "ASCENDING"
  }

  fields {
    field_path = "created_at"
    order      = "DESCENDING"
  }

  fields {
    field_path = "client_id"
    order      = "DESCENDING"
  }

  fields {
    field_path = "__name__"
    order      = "DESCENDING"
  }

  depends_on = [google_firestore_index.jobs_school_users_created]
}

resource "google_firestore_index" "jobs_school_users_submission_created" {
  database    = google_firestore_database.main.name
  collection  = var.jobs_collection
  query_scope = "COLLECTION"

  fields {
    field_path = "request.submission_id"
    order      = "ASCENDING"
  }

  fields {
    field_path = "created_at"
    order      = "DESCENDING"
  }

  fields {
    field_path = "client_id"
    order      = "DESCENDING"
  }

  fields {
    field_path = "__name__"
    order      = "DESCENDING"
  }

  depends_on = [google_firestore_index.jobs_school_users_status_created]
}

resource "google_firestore_index" "jobs_school_users_status_submission_created" {
  database    = google_firestore_database.main.name
  collection  = var.jobs_collection
  query_scope = "COLLECTION"

  fields {
    field_path = "status"
    order      = "ASCENDING"
  }

  fields {
    field_path = "request.submission_id"
    order      = "ASCENDING"
  }

  fields {
    field_path = "created_at"
    order      = "DESCENDING"
  }

  fields {
    field_path = "client_id"
    order      = "DESCENDING"
  }

  fields {
    field_path = "__name__"
    order      = "DESCENDING"
  }

  depends_on = [google_firestore_index.jobs_school_users_submission_created]
}

# A student's erasure (FirestoreJobEraser.jobs_of_student) includes the jobs users of the
# school stored before jobs had an author: request.student_id == S and C:user: <=
# client_id < C:user; (a range beside an equality needs this index; the other branches
# of its OR use the single-field ones).
resource "google_firestore_index" "jobs_student_client" {
  database    = google_firestore_database.main.name
  collection  = var.jobs_collection
  query_scope = "COLLECTION"

  fields {
    field_path = "request.student_id"
    order      = "ASCENDING"
  }

  fields {
    field_path = "client_id"
    order      = "ASCENDING"
  }

  depends_on = [google_firestore_index.jobs_school_users_status_submission_created]
}

# A school's assignment list (FirestoreAssignmentStore.list_of) includes those its users
# made before objects had an author: client_id == C OR C:user: <= client_id < C:user;
# order by created_at desc, client_id desc, __name__ desc. The equality branch uses
# assignments_client_created, the range branch this index.
resource "google_firestore_index" "assignments_school_users_created" {
  database    = google_firestore_database.main.name
  collection  = "assignments"
  query_scope = "COLLECTION"

  fields {
    field_path = "created_at"
    order      = "DESCENDING"
  }

  fields {
    field_path = "client_id"
    order      = "DESCENDING"
  }

  fields {
    field_path = "__name__"
    order      = "DESCENDING"
  }

  depends_on = [google_firestore_index.jobs_student_client]
}
