"""What grading leaves for the learner: each notebook's feedback page (its data, rendered once), its
exporters and template, and the markup on it."""
