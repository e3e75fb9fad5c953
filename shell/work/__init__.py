"""The worker and the reviewer: processes that run agents and judge their results."""
