"""The auxiliary run service (asyncio) over its SQL rows."""
