"""Where scores are decided: the trusted judge, the hidden tests' format (ideas), and the untrusted
runner the judge talks to over a pipe (it imports nothing of the grader)."""
