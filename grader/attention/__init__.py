"""The types of a graded function's declaration (`api`) and the attention pattern a designed head
makes (`patterns`). A course's reference, mistakes and answers live in the course's own code."""
