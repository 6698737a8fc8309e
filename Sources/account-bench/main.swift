// Placeholder: the account benchmark.
