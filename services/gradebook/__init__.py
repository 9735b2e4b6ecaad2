"""The gradebook subscriber: posted grades into each school's LMS gradebook."""
