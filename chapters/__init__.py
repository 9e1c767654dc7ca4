"""One module per paper section: each chapter's protocol and estimators (see README, Architecture)."""
