"""`aios-ledger mcp`: the ledger's tools and resources for a model's own loop, over the Model
Context Protocol (stdio or Streamable HTTP), as an adapter of the HTTP API (`server.py`), with
one table of tools (`tools.py`) and the command (`cli.py`)."""
