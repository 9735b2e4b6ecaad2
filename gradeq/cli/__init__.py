"""`gradeq`: the command line for clients and operators of a Gradeq intake.

It speaks HTTP to an intake (the local stack or a deployed one) through `gradeq.client`,
and is not deployed.
"""
