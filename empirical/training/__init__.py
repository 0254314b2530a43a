"""Training runs, NormTracker, fits, checkpoint scans, callbacks, projection; imports measure and models."""
