"""Benchmarks of Gradeq: `make bench` (peers.py) and the one-off measurements beside it.

`python -m bench.peers` runs Gradeq's embedded default side by side with the queues a
user would pick instead (Flask + Celery, Flask + RQ, and a bare Flask endpoint) and
prints one table. `bench_enqueue.py` and `cost_per_job.py` are run on their own.
"""
