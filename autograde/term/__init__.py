"""The term: what an instructor downloads from an LMS, read into the grader's folders (intake), and
what goes back to it (feedback pages handed back, grades exported), with the class report and the
similarity check. See docs/architecture.md for each module."""
