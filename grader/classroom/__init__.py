"""A class at a time: grading a folder of submissions (`batch`, with `submission_metadata` for a
Gradescope export's list of submitters), the item analysis of the results (`analysis`) and the
class report drawn from it (`class_report`: CSV, HTML, plots), and the student and autograder
bundles (`release`)."""
