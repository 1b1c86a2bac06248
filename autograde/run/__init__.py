"""Running one student's notebooks: the grading worker (job), the learner's kernel (kernels), the
sandbox and its limits, nbgrader's preprocessors."""
