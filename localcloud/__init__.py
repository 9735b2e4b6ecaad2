"""Local stand-ins for Google Cloud: Cloud Tasks, Pub/Sub push, the emulators, the stack.

Nothing here is deployed. `python -m localcloud` runs the whole pipeline on one machine.
"""
