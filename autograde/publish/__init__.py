"""What is published from the instructor's sources: the learner release and the grading master
(release), and the scan for answers that must not leak into either (leaks)."""
