// Placeholder: the device worker for SIGKILL tests is written next.
