// Placeholder: the account worker for multi-process tests.
