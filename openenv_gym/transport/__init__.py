"""Transport: the asyncio driver on one background loop thread, and the sync facade."""
