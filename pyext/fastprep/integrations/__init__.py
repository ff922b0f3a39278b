"""fastprep inside other frameworks: Ray Data."""
