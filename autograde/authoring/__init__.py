"""Commands around the release: the learner bundle (bundle) and a learner's or author's check of one
notebook (validate)."""
