"""The reference web frontend of the local stack: a student submits an answer and watches
it being graded.

It shows the pattern web frontends should copy: the browser never holds the API key (this
small backend adds it), the page makes one Idempotency-Key per submission and sends it
again on every retry, and it polls at the intake's Retry-After until the job is final.
"""
