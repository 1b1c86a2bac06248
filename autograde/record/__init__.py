"""What grading leaves: feedback pages (exporters), the course gradebook, the score tables, the final
export and the class report."""
