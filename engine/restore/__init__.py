"""Physical restore: plan → rewrite → verify → install, journaled as a job."""
