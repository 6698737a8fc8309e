// Placeholder: the audit benchmark is written next.
