"""Instructor command for the course: release, check, grade, validate, bundle.

Run ``python -m autograde --help``. Grading goes through nbgrader's own pipeline
(generate_assignment, autograde, generate_feedback, the gradebook); this package adds
isolation, time limits, resumable batches, parallel workers and leak-free feedback.
"""
