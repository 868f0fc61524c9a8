"""A class at a time: grading a folder of submissions (`batch`), the item analysis of the
results (`analysis`), and the student and autograder bundles (`release`)."""
