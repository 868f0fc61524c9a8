"""The maths: the reference implementation (`reference`), the student API it answers (`api`),
known-wrong variants and detectors of named mistakes (`mistakes`, `detectors`), and designed
head patterns (`patterns`). Imports nothing above it."""
