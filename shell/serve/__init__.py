"""`aios-ledger serve`: the application it runs, the HTTP API (`shell/api`) with the web console
(`shell/web`) under `/` (`app`), and the command (`cli`)."""
