"""The web console `aios-ledger serve` answers under `/`: server-rendered pages for the people
who answer for agents. docs/console.md tells how to add a page.
"""
