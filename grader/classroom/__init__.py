"""A class at a time: grading a folder of submissions (`batch`), the item analysis of the
results (`analysis`) and the class report drawn from it (`class_report`: CSV, HTML, plots), and
the student and autograder bundles (`release`)."""
